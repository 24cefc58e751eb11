# The served-mode client: Claude Code runs it as a command hook (exec form: /bin/bash -c <this text>
# subconscious-served <event> <port>), written into a settings file by `subconscious install --served`.
# It forwards the hook's JSON to `subconscious serve` on 127.0.0.1:<port> and prints its answer: bash's
# own /dev/tcp, no other program, no Python start. Whatever goes wrong (no server, a wedged one, no
# token, an answer that is not 200, a listener that is not this user's) it prints nothing and exits 0:
# Claude Code sees a hook that had nothing to say, never a failed one. Plain bash 3.2 (macOS) and later.
# The @…@ names are filled in by subconscious.served.client_script from the server's own constants (the
# headers it reads, the settings it takes from them, the stdin limit), so the two cannot drift apart.
exec 2>/dev/null  # nothing of ours on Claude Code's screen, whatever bash has to say
trap '' PIPE  # a server that hangs up early makes a write fail (then exit 0), not kill the hook
trap 'exit 0' TERM  # the watchdog below, or Claude Code giving up: a silent exit, never a failed hook
ev=$1 port=$2
# the whole run (stdin, connect, write, read) is bounded under the hook's timeout (5 s, 10 s): bash's
# /dev/tcp has no connect timeout, and a server can stop reading or answer a byte a second
case $ev in pre-tool-use) budget=4.3 ;; user-prompt-submit) budget=9.0 ;; *) exit 0 ;; esac  # then 0.5 s of TERMs
tick=0.1 old=
case $BASH_VERSION in [0-3].* | 4.0.*) old=1 ;; esac  # no read -N, and read -t takes whole seconds
[ -z "$old" ] || { budget=${budget%.*} tick=1; }
case $port in '' | *[!0-9]*) exit 0 ;; esac
# The watchdog: a subshell reading a pipe only this process holds open. This process ending closes it (the
# watchdog sees EOF and ends too, no kill); past the budget the pipe is still open, so this process is still
# there (its pid cannot be another's): TERM interrupts whatever blocks (connect, write, read), again each tick
# (a write interrupted after part of it went out is carried on by printf: the next TERM ends it), then KILL.
# Started only where something could block without it (a fork costs the hook ~10%): a listener with
# connections waiting to be accepted (a full queue makes connect hang: bash's /dev/tcp has no timeout), a
# body a server that does not read could leave stuck in write, or no /proc to look at the listener.
watchdog() {
  exec 4> >(exec >/dev/null; IFS= read -r -t "$budget" _; [ $? -gt 128 ] || exit 0
            for _ in 1 2 3 4 5; do kill -TERM $$; IFS= read -r -t $tick _; [ $? -gt 128 ] || exit 0; done
            kill -KILL $$)
}
LC_ALL=C
t0=${EPOCHREALTIME:-}  # bash 5: the start in microseconds, for what is left of the budget without a watchdog
t0=${t0//[!0-9]/} wd= end=
[ -z "$t0" ] || end=$((t0 + ${budget%.*}${budget#*.}00000))  # µs (the budget has one decimal)
if [ -z "$t0" ]; then watchdog; wd=1; fi  # bash before 5 cannot tell what is left of the budget: from the start
dir=${SUBCONSCIOUS_STATE_DIR:-}  # the state dir as subconscious finds it: its serve/ has the token and port
case $dir in '~' | '~/'*) dir=$HOME${dir#'~'} ;; esac
if [ -z "$dir" ]; then
  case ${XDG_STATE_HOME:-} in
    /*) dir=$XDG_STATE_HOME/subconscious ;;
    *) case $OSTYPE in darwin*) dir="$HOME/Library/Application Support/subconscious" ;;
                       *) dir=$HOME/.local/state/subconscious ;; esac ;;
  esac
fi
# serve/ and its files are read only when this user owns them and none is a link: a state dir another user
# can write to (a shared SUBCONSCIOUS_STATE_DIR) must not choose where the hook's input goes, nor its token
own() { [ -O "$1" ] && [ ! -L "$1" ]; }
own "$dir/serve" || dir=/nonexistent
# the port a server of this user's moved to when another process held this one (local.autostart)
own "$dir/serve/port" && IFS= read -r moved <"$dir/serve/port" && case $moved in '' | *[!0-9]*) ;; *) port=$moved ;; esac
token=${@TOKEN_VAR@:-}
[ -n "$token" ] || { own "$dir/serve/token" && IFS= read -r token <"$dir/serve/token"; }
case $token in '' | *[!A-Za-z0-9_-]*) exit 0 ;; esac
# Linux: the listener on 127.0.0.1:$port must be this user's (the uid column of /proc/net/tcp), or it gets
# nothing, not even a connection. The table lists listening sockets first, a line of 150 bytes each: read a
# line per read, the kernel makes only the lines read, and the first listener on the port decides (no other
# can share it: another user's bind, v4 or dual-stack v6, fails while ours listens, ours while another's
# does). Not read whole: the rest, every connection on the machine, costs a walk of the kernel's whole
# connection table (5-10 ms; /proc/net/tcp6, even empty, as much). A line not as expected: not ours.
ours() {
  local line hex IFS n=0
  printf -v hex '%04X' "$port"
  exec 5</proc/net/tcp || return 1
  if [ -z "$old" ]; then IFS= read -r -u 5 -N 150 line; else IFS= read -r -u 5 -n 150 line; fi
  case $line in "  sl  local_address rem_address   st "*) ;; *) return 1 ;; esac
  while if [ -z "$old" ]; then IFS= read -r -u 5 -N 150 line; else IFS= read -r -u 5 -n 150 line; fi; do
    case $line in
      *": 0100007F:$hex 00000000:0000 0A "* | *": 00000000:$hex 00000000:0000 0A "*)
        set -f
        set -- $line
        queued=${5#*:}  # rx_queue: connections waiting to be accepted
        case $queued in *[!0-9A-Fa-f]* | '') queued=1 ;; *) queued=$((16#$queued)) ;; esac
        exec 5<&-
        [ "$8" = "$UID" ]
        return ;;
      *" 00000000:0000 0A "*)  # another port's listener. Another user can open 100,000 of them (a few MB): the
        # scan took 3 s, twice; past the budget it gives up (nothing is sent; without EPOCHREALTIME the watchdog runs)
        if [ -n "$end" ] && [ $((++n & 1023)) -eq 0 ] && [ ${EPOCHREALTIME//[!0-9]/} -gt $end ]; then return 1; fi ;;
      *) return 1 ;;  # past the listeners: none on the port
    esac
  done
  return 1
}
linux= queued=1
[ -e /proc/net/tcp ] && linux=1
case $OSTYPE in linux*) linux=1 ;; esac
if [ -n "$linux" ]; then ours || exit 0; fi
# stdin bounded: a body over the limit is not sent. read -N takes a pipe in blocks (-d '' a byte at a time:
# 1 MiB in about a second, for bash before 4.1); JSON holds no NUL
# (no -t: with it bash makes two system calls a byte; Claude Code writes the input whole and closes it)
if [ -z "$old" ]; then IFS= read -r -N @STDIN_LIMIT_PLUS_1@ body; else IFS= read -r -d '' -n @STDIN_LIMIT_PLUS_1@ body; fi
[ ${#body} -le @STDIN_LIMIT@ ] || exit 0
if [ -z "$wd" ]; then
  now=${EPOCHREALTIME//[!0-9]/}
  left=$(( ${budget%.*}${budget#*.}00000 - now + t0 ))  # µs (the budget has one decimal)
  [ $left -gt 100000 ] || exit 0
  printf -v budget '%d.%06d' $((left / 1000000)) $((left % 1000000))  # what is left, for what follows
  if [ "$queued" -gt 0 ] || [ ${#body} -gt 32768 ]; then watchdog; fi
fi
crlf=$'\r\n'
head="POST /subconscious/hook/$ev HTTP/1.0${crlf}Host: 127.0.0.1:$port${crlf}Content-Type: application/json${crlf}"
head+="@TOKEN_HEADER@: $token$crlf"
for var in @FORWARDED_VARS@; do
  value=${!var}
  value=${value//[$'\r\n']/}
  if [ -n "$value" ]; then head+="@ENV_HEADER@$var: $value$crlf"; fi
done
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 0
# still this user's listener once connected (had another's taken the port in between and let it go, there
# would be none now: ours takes a second or more to start)
if [ -n "$linux" ]; then ours || exit 0; fi
printf '%sContent-Length: %d%s%s%s' "$head" "${#body}" "$crlf" "$crlf" "$body" >&3 || exit 0
if [ -z "$old" ]; then IFS= read -r -u 3 -t "$budget" -N 16777216 answer; else IFS= read -r -u 3 -t "$budget" -d '' answer; fi
[ $? -gt 128 ] && exit 0  # no whole answer in time: the server is wedged or slow; say nothing
exec 4>&-  # the answer is whole (the server closed): the watchdog stands down before anything is printed
case $answer in "HTTP/1."?" 200 "*) ;; *) exit 0 ;; esac
case $answer in *"$crlf$crlf"*) printf '%s' "${answer#*"$crlf$crlf"}" ;; esac
exit 0
