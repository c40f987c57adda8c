/* mathx: reads vectors "x y z" (one per line) from stdin and prints
 * their sum, and the mean and sample standard deviation of their norms. */
#include <stdio.h>
#include "vec.h"
#include "stats.h"

#define MAXV 1024

int main(void) {
    static double norms[MAXV];
    vec3 sum = {0, 0, 0}, v;
    size_t n = 0;
    while (n < MAXV && scanf("%lf %lf %lf", &v.x, &v.y, &v.z) == 3) {
        sum = vec_add(sum, v);
        norms[n++] = vec_norm(v);
    }
    printf("count %zu\n", n);
    printf("sum %.3f %.3f %.3f\n", sum.x, sum.y, sum.z);
    printf("mean_norm %.4f\n", stats_mean(norms, n));
    printf("stddev_norm %.4f\n", stats_stddev(norms, n));
    return 0;
}
