/* textstat: print "lines words bytes longest" for standard input.
 *   lines   = number of newline characters
 *   words   = maximal runs of non-whitespace characters (space, \t, \n, \r, \v, \f separate words)
 *   bytes   = number of bytes read
 *   longest = length in bytes of the longest line, not counting its newline
 *             (a final line without a trailing newline counts too)
 */
#include <stdio.h>
#include "counts.h"

int main(void) {
    struct counts c;
    char buf[64];
    size_t n;

    counts_init(&c);
    while ((n = fread(buf, 1, sizeof buf - 1, stdin)) > 0) {
        counts_feed(&c, buf, n);
    }
    counts_finish(&c);
    printf("%ld %ld %ld %ld\n", c.lines, c.words, c.bytes, c.longest);
    return 0;
}
