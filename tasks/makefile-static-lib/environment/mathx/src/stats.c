#include <math.h>
#include "stats.h"

double stats_mean(const double *v, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : 0.0;
}

double stats_stddev(const double *v, size_t n) {
    if (n < 2)
        return 0.0;
    double m = stats_mean(v, n), s = 0;
    for (size_t i = 0; i < n; i++)
        s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (double)(n - 1));
}
