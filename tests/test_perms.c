#include "harness.h"
void add_perms_tests(TCase *tc) { (void)tc; }
