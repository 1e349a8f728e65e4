/* placeholder */
#include "testutil.h"
static void t_placeholder(void **state) { (void)state; }
int main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(t_placeholder)};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
