#include <math.h>
#include "vec.h"

vec3 vec_add(vec3 a, vec3 b) {
    vec3 r = {a.x + b.x, a.y + b.y, a.z + b.z};
    return r;
}

double vec_dot(vec3 a, vec3 b) {
    return a.x * b.x + a.y * b.y + a.z * b.z;
}

double vec_norm(vec3 a) {
    return sqrt(vec_dot(a, a));
}
