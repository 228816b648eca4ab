# The command-line checks the shell scripts of scripts/ and bench/ share: sourced, not run,
# first thing in a script (before it installs, builds or writes anything):
#   . "$(dirname "$0")/script_args.sh"            (from bench/: ../scripts/script_args.sh)
#   script_help "$0" "$@"                         -h or --help: the usage, exit 0
#   script_args NAME MAX "$@"                     an option, or more than MAX arguments: exit 2
#   own_dir NAME WHAT DIR MARKER                  DIR is new, empty or made by the script, or exit 2
# A script's usage is its header: the comment lines from the second line to `set -euo`.

# script_sourced <file> <usage> <arg ...>: for a file meant to be sourced (give it
# ${BASH_SOURCE[0]}), when it is run instead: -h or --help prints "usage: <usage>" (exit 0),
# anything else is refused (exit 2).
script_sourced() {
  local file=$1 usage=$2
  shift 2
  [ "$file" = "$0" ] || return 0
  case ${1:-} in
    -h | --help) echo "usage: $usage"; exit 0 ;;
    *) echo "$(basename "$file"): sourced, not run${1:+ (got $1)}; usage: $usage" >&2; exit 2 ;;
  esac
}
script_sourced "${BASH_SOURCE[0]}" ". scripts/script_args.sh (in the scripts of scripts/ and bench/)" "$@"

# script_help <script path> <arg ...>: -h or --help among the arguments prints the script's
# header and exits 0.
script_help() {
  local self=$1 a
  shift
  for a in "$@"; do
    case $a in
      -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$self"; exit 0 ;;
    esac
  done
}

# script_args <name> <most> <arg ...>: refuses (exit 2, naming it) an argument that starts
# with "-" (the script takes no option) and more than <most> arguments.
script_args() {
  local name=$1 most=$2 a
  shift 2
  for a in "$@"; do
    case $a in
      -*) echo "$name: unknown option $a (see $name --help)" >&2; exit 2 ;;
    esac
  done
  if [ $# -gt "$most" ]; then
    echo "$name: at most $most argument(s), got $#: $* (see $name --help)" >&2
    exit 2
  fi
}

# own_dir <name> <what> <dir> <marker>: for a script that clears or reconfigures a directory
# it is given: <dir> must be new (made here, with its parents; OWN_DIR_MADE=1, else 0), empty,
# or hold <marker>, the file the script leaves in every directory it uses; then <marker> is
# left in it. A path that is no directory, or a directory holding anything else (someone's
# data, another build tree), is refused (exit 2, naming <what> <dir> and the marker) and
# nothing in it is touched.
own_dir() {
  local name=$1 what=$2 dir=$3 marker=$4
  OWN_DIR_MADE=0
  if [ -e "$dir" ] && [ ! -d "$dir" ]; then
    echo "$name: $what $dir is not a directory" >&2
    exit 2
  elif [ -d "$dir" ]; then
    if [ ! -e "$dir/$marker" ] && [ -n "$(ls -A "$dir")" ]; then
      echo "$name: $what $dir is not empty and was not made by this script (no $marker in it):" \
           "refusing to use it; give a new or empty directory" >&2
      exit 2
    fi
  else
    mkdir -p "$dir"
    OWN_DIR_MADE=1
  fi
  touch "$dir/$marker"
}
