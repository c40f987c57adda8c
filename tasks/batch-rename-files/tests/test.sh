#!/bin/bash
# Verifier for batch-rename-files (plain bash checks).
mkdir -p /logs/verifier
export LC_ALL=C
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
listing() { (cd "$1" && for f in * .[!.]*; do [ -e "$f" ] && printf "%s=%s\n" "$f" "$(cat "./$f" 2>/dev/null || echo DIR)"; done) }

[ -f /app/rename.sh ] || fail "/app/rename.sh missing"

# 1) /app/photos must have been processed
expected_photos=$(cat <<'EXP'
Old Albums=DIR
beach_sunset.jpg=content of   Beach -- Sunset!!.JPEG
draft.txt=content of -draft-.txt
file.gif=content of ###.gif
img_0001.jpg=content of IMG 0001.JPG
img_0001_2.jpg=content of IMG_0001.jpeg
notes_v2.txt=content of notes.v2.TXT
readme=content of README
summer_trip_1.png=content of summer_trip_1.png
summer_trip_1_2.png=content of Summer Trip (1).PNG
summer_trip_2.png=content of Summer Trip (2).png
trailing_dot=content of trailing.dot.
.hidden_config=content of .hidden_config
EXP
)
got=$(listing /app/photos)
[ "$got" = "$expected_photos" ] || { fail "/app/photos not as expected"; diff <(echo "$expected_photos") <(echo "$got"); }
[ -f "/app/photos/Old Albums/Keep Me.JPG" ] || fail "subdirectory content was renamed"

# 2) a fresh directory with other names
fx=$(mktemp -d /tmp/rename-fx.XXXXXX)
for f in "A.JPG" "a.jpg" "Hello World.Tar.GZ" "x" ".dotfile" "Ünïcode Name.md" "--.txt" "report (final) (2).PDF" \
         "NoExt." "photo.JPEG" "photo.jpg" "photo_2.jpg" "MiXeD_CaSe.Txt"; do
  printf '%s' "$f" > "$fx/$f"
done
mkdir "$fx/Sub Dir" && printf 'inner' > "$fx/Sub Dir/IN SIDE.TXT"
out=$(cd / && bash /app/rename.sh "$fx" 2>&1) || fail "rename.sh exited non-zero: $out"
expected_fx=$(cat <<'EXP'
Sub Dir=DIR
a.jpg=a.jpg
a_2.jpg=A.JPG
file.txt=--.txt
hello_world_tar.gz=Hello World.Tar.GZ
mixed_case.txt=MiXeD_CaSe.Txt
n_code_name.md=Ünïcode Name.md
noext=NoExt.
photo.jpg=photo.jpg
photo_2.jpg=photo_2.jpg
photo_3.jpg=photo.JPEG
report_final_2.pdf=report (final) (2).PDF
x=x
.dotfile=.dotfile
EXP
)
got=$(listing "$fx")
[ "$got" = "$expected_fx" ] || { fail "fixture directory not renamed as expected"; diff <(echo "$expected_fx") <(echo "$got"); }
[ -f "$fx/Sub Dir/IN SIDE.TXT" ] || fail "recursed into a subdirectory"
printf '%s\n' "$out" | grep -qxF 'A.JPG -> a_2.jpg' || fail "missing output line 'A.JPG -> a_2.jpg'"
printf '%s\n' "$out" | grep -qxF 'photo.JPEG -> photo_3.jpg' || fail "missing output line 'photo.JPEG -> photo_3.jpg'"
[ "$(printf '%s\n' "$out" | grep -c ' -> ')" = "8" ] || fail "expected 8 output lines, got: $out"
# running it again changes nothing and prints nothing
out2=$(bash /app/rename.sh "$fx" 2>&1) || fail "second run failed"
[ -z "$out2" ] || fail "second run printed: $out2"
[ "$(listing "$fx")" = "$expected_fx" ] || fail "second run changed names"
rm -rf "$fx"

if [ $fails -eq 0 ]; then echo PASS; echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
