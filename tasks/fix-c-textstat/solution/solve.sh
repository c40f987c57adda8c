#!/bin/bash
set -e

cd /app/textstat && cat src/counts.c && make && printf 'a\tb  c' | ./textstat

cat > /app/textstat/src/counts.c <<'C'
#include "counts.h"
static int is_space(char ch) {
    return ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}
void counts_init(struct counts *c) {
    c->lines = c->words = c->bytes = c->longest = 0;
    c->cur_len = 0;
    c->in_word = 0;
}
void counts_feed(struct counts *c, const char *buf, size_t n) {
    for (size_t i = 0; i < n; i++) {
        char ch = buf[i];
        c->bytes++;
        if (ch == '\n') {
            c->lines++;
            if (c->cur_len > c->longest)
                c->longest = c->cur_len;
            c->cur_len = 0;
        } else {
            c->cur_len++;
        }
        if (is_space(ch)) {
            if (c->in_word)
                c->words++;
            c->in_word = 0;
        } else {
            c->in_word = 1;
        }
    }
}
void counts_finish(struct counts *c) {
    if (c->in_word)
        c->words++;
    c->in_word = 0;
    if (c->cur_len > c->longest)
        c->longest = c->cur_len;
}
C

cd /app/textstat && make clean && make && printf 'a\tb  c' | ./textstat && printf '' | ./textstat && printf 'hello world\nfoo\n' | ./textstat
