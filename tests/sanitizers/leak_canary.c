/* Leaks one string the library returned, on purpose: make test-c runs it built with
 * AddressSanitizer and requires LeakSanitizer to report it, so a sandbox where leak
 * checking is silently off (ptrace, a missing runtime) fails the run instead of letting
 * the sanitized hosts pass unchecked. Not a host: it must fail. */
#include <stddef.h>

#include "inboxlog.h"

static char *leaked;

static void leak(inboxlog_store *store) {
    char *list = NULL;
    if (inboxlog_store_list(store, &list, NULL) == INBOXLOG_STATUS_OK) leaked = list;
}

int main(void) {
    inboxlog_store *store = NULL;
    if (inboxlog_store_new_memory(&store, NULL) != INBOXLOG_STATUS_OK) return 2;
    leak(store);
    leaked = NULL; /* the last pointer to the string is gone */
    inboxlog_store_free(store);
    return 0;
}
