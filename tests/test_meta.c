#include "harness.h"
void add_meta_tests(TCase *tc) { (void)tc; }
