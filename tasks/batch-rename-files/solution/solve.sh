#!/bin/bash
set -e
ls -la /app/photos

cat > /app/rename.sh <<'SH'
#!/bin/bash
# Normalise the names of the regular files directly inside DIR (see the task rules).
set -euo pipefail
export LC_ALL=C
dir=${1:?usage: rename.sh DIR}
cd "$dir"
while IFS= read -r -d '' path; do
  name=${path#./}
  [ -f "$name" ] || continue
  base=$name ext=
  dotless=${name%.*}
  if [ "$dotless" != "$name" ] && [ -n "$dotless" ] && [ "${name: -1}" != "." ]; then
    base=$dotless ext=${name##*.}
  fi
  base=$(printf '%s' "$base" | tr 'A-Z' 'a-z' | sed -E 's/[^a-z0-9]+/_/g; s/^_+//; s/_+$//')
  ext=$(printf '%s' "$ext" | tr 'A-Z' 'a-z')
  [ -n "$base" ] || base=file
  [ "$ext" = "jpeg" ] && ext=jpg
  new=$base${ext:+.$ext}
  [ "$new" = "$name" ] && continue
  n=1
  while [ -e "$new" ] || [ -L "$new" ]; do
    n=$((n + 1))
    new=${base}_$n${ext:+.$ext}
  done
  mv -- "$name" "$new"
  printf '%s -> %s\n' "$name" "$new"
done < <(find . -mindepth 1 -maxdepth 1 -type f ! -name '.*' -print0 | sort -z)
SH

chmod +x /app/rename.sh && bash -n /app/rename.sh

bash /app/rename.sh /app/photos

ls -la /app/photos
