#include "harness.h"
void add_dirs_tests(TCase *tc) { (void)tc; }
