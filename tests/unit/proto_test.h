/* proto_test.h - what the proto/ unit tests share: inputs placed against a PROT_NONE guard page
 * (guard.h: a read past the given length faults), an allocation counter (alloc_count.h: a codec
 * call must make none; test_ws counts wslay's contexts, whose allocations are not wrapped), a
 * CHECK that names the case (guard.h), and S() for a literal as a struct sq_str.
 *
 * The allocation counter needs the test linked with --wrap=malloc,--wrap=calloc,--wrap=realloc
 * (CMakeLists.txt does it for test_nats, test_mqtt, test_ws and test_stamp). Include it once,
 * after cmocka.h.
 */
#ifndef SQ_TEST_PROTO_TEST_H
#define SQ_TEST_PROTO_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "guard.h"

#define S(lit) ((struct sq_str){(lit), sizeof(lit) - 1})

#endif
