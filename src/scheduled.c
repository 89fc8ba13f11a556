/* scheduled.c: placeholder until the poller lands (issue 3). */
#include "daemon.h"

int poller_start(void)
{
	atomic_store(&D.ready_for_ticker, 1);
	return 0;
}
