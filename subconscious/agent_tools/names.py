"""Name-based checks shared by every tool (Read/Grep/Glob, Write/Edit, ignore rules): one place, one
comparison. A name is compared the way the most lenient filesystem would open it:

- case-insensitively (macOS and Windows open ``.ENV`` for ``.env`` and ``.GIT/hooks`` for ``.git/hooks``);
- without trailing dots and spaces (Windows opens ``.env.`` and ``.git `` as ``.env`` and ``.git``);
- without an NTFS stream suffix (``.env::$DATA`` is ``.env`` on Windows);
- without the code points HFS+ ignores (``.g\\u200cit`` is ``.git`` there);
- ``git~1``-style 8.3 short names count as ``.git`` (git refuses them for the same reason).

Use :func:`is_secret_name` (a file named like a credential), :func:`is_secret_dir` (a directory that
holds credentials), :func:`is_git_name` (``.git``) and :func:`hidden_part` (any of these for one path
component) instead of comparing names yourself.
"""
from __future__ import annotations

import fnmatch
import re

__all__ = ["fold", "SECRET_NAMES", "SECRET_DIRS", "SECRET_OK", "is_secret_name", "is_secret_dir", "is_git_name",
           "hidden_part"]

# file names never shown or written (credentials by convention); lower case, matched against fold(name)
SECRET_NAMES = (
    ".env", ".env.*", ".envrc",
    "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx", "*.ppk", "*.asc",
    "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk",
    "id_rsa.*", "id_dsa.*", "id_ecdsa.*", "id_ed25519.*", "id_rsa_*", "id_dsa_*", "id_ecdsa_*", "id_ed25519_*",
    ".netrc", "_netrc", ".npmrc", ".pypirc", ".git-credentials", ".pgpass", ".htpasswd", ".vault-token",
    "credentials", "credentials.json", ".credentials.json", "application_default_credentials.json",
    "client_secret*.json", "service-account*.json", "service_account*.json", "serviceaccount*.json",
    "*-service-account.json", "*_service_account.json", "*-sa-key.json", "sa-key*.json",
    "kubeconfig", "kubeconfig.*", "*.kubeconfig",
    "terraform.tfvars", "*.tfvars", "*.tfvars.json", "*.tfstate", "*.tfstate.*",
)
SECRET_DIRS = frozenset({".ssh", ".gnupg", ".aws", ".kube", ".password-store", ".docker", ".azure"})  # never entered
# credential-looking names that are fine: templates and public keys
SECRET_OK = (".env.example", ".env.sample", ".env.template", ".env.dist", "*.pub")

_IGNORABLE = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u206a-\u206f\ufeff]")
_SHORT_GIT = re.compile(r"git~\d+")


def fold(name: str) -> str:
    """The name as a case-insensitive, Windows-normalising filesystem sees it (for comparisons only)."""
    name = _IGNORABLE.sub("", name)
    if ":" in name:  # an NTFS alternate data stream names its file before the colon
        name = name.split(":", 1)[0]
    return name.rstrip(". ").casefold()


def _matches(folded: str, patterns) -> bool:
    return any(fnmatch.fnmatchcase(folded, p) for p in patterns)


def is_secret_name(name: str) -> bool:
    """Is a file with this name a credential by convention (whatever its case or trailing dots)?"""
    f = fold(name)
    if not f:
        return False
    if _matches(f, SECRET_OK):
        return False
    return _matches(f, SECRET_NAMES)


def is_secret_dir(name: str) -> bool:
    return fold(name) in SECRET_DIRS


def is_git_name(name: str) -> bool:
    """``.git`` as any filesystem may open it (``.GIT``, ``.git.``, ``git~1``)."""
    f = fold(name)
    return f == ".git" or _SHORT_GIT.fullmatch(f) is not None


def hidden_part(name: str, *, is_dir: bool) -> str | None:
    """Why a path component with this name is never shown (None: its name is fine)."""
    if is_git_name(name):
        return "files inside .git are not shown"
    if fold(name) == ".letta":
        return "the subconscious's own state (.letta) is never shown"
    if is_secret_dir(name):
        return "directories that hold credentials (%s) are never shown" % name
    if not is_dir and is_secret_name(name):
        return "files named like credentials (%s) are never shown" % name
    return None
