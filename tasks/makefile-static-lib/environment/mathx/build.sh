#!/bin/sh
# Old ad-hoc build script, to be replaced by a Makefile.
gcc -O2 -o mathx src/main.c src/vec.c src/stats.c -lm
