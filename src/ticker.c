/* ticker.c: placeholder until the periodic ticker lands (issue 4). */
#include "daemon.h"

int ticker_start(void)
{
	return 0;
}
