#ifndef COUNTS_H
#define COUNTS_H
#include <stddef.h>

struct counts {
    long lines, words, bytes, longest;
    long cur_len;   /* length of the current line so far */
    int in_word;    /* 1 while inside a word */
};

void counts_init(struct counts *c);
void counts_feed(struct counts *c, const char *buf, size_t n);
void counts_finish(struct counts *c);

#endif
