#include "harness.h"
void add_files_tests(TCase *tc) { (void)tc; }
