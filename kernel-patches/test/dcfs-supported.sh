#!/bin/sh
# Exit 0 if the dcfs binary $1 accepts a config that sends everything
# through the dontcache class.
cfg=$(mktemp)
trap 'rm -f "$cfg"' EXIT
printf '[global]\ndefault = dontcache\nmin_size = 0\n' > "$cfg"
"$1" --check-config "$cfg" >/dev/null 2>&1
