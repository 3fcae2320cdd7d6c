/* A PostgreSQL call from a C program's main thread leaves nothing valgrind reports
 * beyond what the shipped suppressions (ffi/valgrind.supp) name: the Makefile runs every
 * host under valgrind with that file alone. A refused connect is enough to reach the
 * PostgreSQL client's runtime, so this host needs no server. */
#include "check.h"

int main(void) {
    inboxlog_store *store = NULL;
    EXPECT_STATUS(INBOXLOG_STATUS_UNAVAILABLE, "127.0.0.1:1",
                  inboxlog_store_open_postgres("postgresql://nobody@127.0.0.1:1/none", NULL,
                                               &store, &err));
    EXPECT(store == NULL);
    puts("pg_main_thread: ok");
    return 0;
}
