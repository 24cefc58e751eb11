# The served-mode client: Claude Code runs it as a command hook (exec form: /bin/bash -c <this text>
# subconscious-served <event> <port>), written into a settings file by `subconscious install --served`.
# It forwards the hook's JSON to `subconscious serve` on 127.0.0.1:<port> and prints its answer: bash's
# own /dev/tcp, no other process, no Python start. Whatever goes wrong (no server, a wedged one, no
# token, an answer that is not 200) it prints nothing and exits 0: Claude Code sees a hook that had
# nothing to say, never a failed one. Plain bash 3.2 (macOS) and later. The @…@ names are filled in by
# subconscious.served.client_script from the server's own constants (the headers it reads, the settings
# it takes from them), so the two cannot drift apart.
exec 2>/dev/null  # nothing of ours on Claude Code's screen, whatever bash has to say
trap '' PIPE  # a server that hangs up early makes a write fail (then exit 0), not kill the hook
ev=$1 port=$2
case $ev in pre-tool-use) wait=4 ;; user-prompt-submit) wait=9 ;; *) exit 0 ;; esac
case $port in '' | *[!0-9]*) exit 0 ;; esac
LC_ALL=C
token=${@TOKEN_VAR@:-}
if [ -z "$token" ]; then
  # the token file `subconscious serve` made: <state dir>/serve/token, the state dir as subconscious finds it
  dir=${SUBCONSCIOUS_STATE_DIR:-}
  case $dir in '~' | '~/'*) dir=$HOME${dir#'~'} ;; esac
  if [ -z "$dir" ]; then
    case ${XDG_STATE_HOME:-} in
      /*) dir=$XDG_STATE_HOME/subconscious ;;
      *) case $OSTYPE in darwin*) dir="$HOME/Library/Application Support/subconscious" ;;
                         *) dir=$HOME/.local/state/subconscious ;; esac ;;
    esac
  fi
  IFS= read -r token <"$dir/serve/token"
fi
case $token in '' | *[!A-Za-z0-9_-]*) exit 0 ;; esac
IFS= read -r -d '' body  # all of stdin (JSON holds no NUL); read's status 1 at the end of input is expected
crlf=$'\r\n'
head="POST /subconscious/hook/$ev HTTP/1.0${crlf}Host: 127.0.0.1:$port${crlf}Content-Type: application/json${crlf}"
head+="@TOKEN_HEADER@: $token$crlf"
for var in @FORWARDED_VARS@; do
  value=${!var}
  value=${value//[$'\r\n']/}
  if [ -n "$value" ]; then head+="@ENV_HEADER@$var: $value$crlf"; fi
done
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 0
printf '%sContent-Length: %d%s%s%s' "$head" "${#body}" "$crlf" "$crlf" "$body" >&3 || exit 0
IFS= read -r -d '' -t "$wait" answer <&3
[ $? -gt 128 ] && exit 0  # no answer in time: the server is wedged or slow; say nothing
case $answer in "HTTP/1."?" 200 "*) ;; *) exit 0 ;; esac
case $answer in *"$crlf$crlf"*) printf '%s' "${answer#*"$crlf$crlf"}" ;; esac
exit 0
