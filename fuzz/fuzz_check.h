/* fuzz_check.h: FUZZ_CHECK, the fuzz targets' own assertion. It stays on in every build (assert
 * goes with NDEBUG) and aborts, which libFuzzer reports as a crash with the input saved. */
#ifndef ENTITYD_FUZZ_CHECK_H
#define ENTITYD_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
