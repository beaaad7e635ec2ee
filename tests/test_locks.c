#include "harness.h"
void add_locks_tests(TCase *tc) { (void)tc; }
