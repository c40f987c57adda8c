#ifndef VEC_H
#define VEC_H

typedef struct {
    double x, y, z;
} vec3;

vec3 vec_add(vec3 a, vec3 b);
double vec_dot(vec3 a, vec3 b);
double vec_norm(vec3 a);

#endif
