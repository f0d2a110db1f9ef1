# Shared by the benchmark scripts (sourced, not run).

# infra_id DIR: the infraID in DIR/metadata.json; fails, saying so, when
# there is none.
infra_id() {
  local id
  id=$(sed -n 's/.*"infraID": *"\([^"]*\)".*/\1/p' "$1/metadata.json")
  [ -n "$id" ] || { echo "no infraID in $1/metadata.json" >&2; return 2; }
  echo "$id"
}
