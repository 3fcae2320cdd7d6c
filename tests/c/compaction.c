/* Compaction through the C ABI (SPEC §16): a host replaces a range of the surface with
 * its summary; a second start is busy, a range that splits a tool call from its result
 * is refused with nothing written, a prune inside the range makes the commit a
 * conflict; a compaction left running when the session closed is ended by the next
 * open; a long tool result is pruned. */
#define _POSIX_C_SOURCE 200809L

#include <string.h>

#include "check.h"

static void free_str(char *s) { inboxlog_string_free(s); }

static const char USER[] = "{\"id\":\"u1\",\"role\":\"user\",\"content\":\"hello there\"}";

static const char CALLING[] =
    "{\"turn\":1,\"step\":1,\"message\":{\"id\":\"a1\",\"role\":\"assistant\",\"content\":["
    "{\"type\":\"tool-call\",\"id\":\"c1\",\"name\":\"t\",\"arguments\":\"{}\"}],"
    "\"source\":{\"kind\":\"model\",\"provider\":\"c\",\"model\":\"host\"}}}";

static const char RESULT_HEAD[] =
    "{\"turn\":1,\"step\":1,\"message\":{\"id\":\"r1\",\"role\":\"user\",\"content\":["
    "{\"type\":\"tool-result\",\"toolCallId\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"";
static const char RESULT_TAIL[] = "\"}]}],\"source\":{\"kind\":\"tool\",\"callId\":\"c1\"}}}";

int main(void) {
    char root[] = "/tmp/inboxlog-c-compaction-XXXXXX";
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL;
    int64_t last = 0, before = 0;

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "k", NULL, &s, &err));
    OK(inboxlog_session_append(s, "user/message", USER, NULL, NULL, &err));      /* 0 */
    OK(inboxlog_session_append(s, "assistant/message", CALLING, NULL, NULL, &err)); /* 1 */
    {
        /* A result of 9,000 characters: pruned later. */
        static char result[9000 + sizeof RESULT_HEAD + sizeof RESULT_TAIL];
        size_t at = strlen(RESULT_HEAD);
        memcpy(result, RESULT_HEAD, at);
        memset(result + at, 'y', 9000);
        memcpy(result + at + 9000, RESULT_TAIL, sizeof RESULT_TAIL);
        OK(inboxlog_session_append(s, "tool/result", result, NULL, NULL, &err)); /* 2 */
    }
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"later\"}", &err)); /* 3 */

    /* A range that splits c1 from its result: refused, nothing written. */
    OK(inboxlog_session_last_seq(s, &before, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "c1", inboxlog_session_begin_compaction(s, 0, 1, &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "no compaction",
                  inboxlog_session_abort_compaction(s, "nothing", &err));
    OK(inboxlog_session_last_seq(s, &last, &err));
    if (last != before) FAIL("a refused start wrote events");

    /* A prune inside the range makes the commit a conflict, with its end written. */
    OK(inboxlog_session_begin_compaction(s, 0, 2, &json, &err)); /* 4 */
    EXPECT_CONTAINS(json, "\"compactionId\":\"compaction-4\",\"turn\":null,\"range\":{\"start\":0,\"end\":2}");
    EXPECT_CONTAINS(json, "\"shadowedSeqs\":[0,1,2]");
    free_str(json);
    EXPECT_STATUS(INBOXLOG_STATUS_BUSY, "runs", inboxlog_session_begin_compaction(s, 0, 2, &json, &err));
    OK(inboxlog_session_prune(s, 2, &json, &err)); /* 5, 6 */
    EXPECT_PREFIX(json, "{\"type\":\"tool/result\",\"seq\":6,");
    EXPECT_CONTAINS(json, "characters pruned");
    free_str(json);
    OK(inboxlog_session_prune(s, 6, &json, &err));
    EXPECT_STR(json, "null");
    free_str(json);
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "commit_json",
                  inboxlog_session_commit_compaction(s, "{\"summary\":\"x\"}", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_CONFLICT, "changed inside the range",
                  inboxlog_session_commit_compaction(
                      s, "{\"summary\":\"x\",\"provider\":\"p\",\"model\":\"m\"}", &json, &err));
    OK(inboxlog_session_events(s, 7, &json, &err));
    EXPECT_CONTAINS(json, "\"data\":{\"compactionId\":\"compaction-4\",\"turn\":null,\"error\":\"conflict\"}");
    free_str(json);

    /* A compaction that commits. */
    OK(inboxlog_session_begin_compaction(s, 0, 6, &json, &err)); /* 8 */
    free_str(json);
    OK(inboxlog_session_commit_compaction(
        s, "{\"summary\":[{\"type\":\"text\",\"text\":\"all of it\"}],\"provider\":\"p\",\"model\":\"m\"}", &json,
        &err)); /* 9, 10, 11 */
    EXPECT_PREFIX(json, "{\"compactionId\":\"compaction-8\",\"summary\":{\"type\":\"compaction/summary\",\"seq\":9,");
    free_str(json);
    OK(inboxlog_session_surface(s, &json, &err));
    EXPECT_PREFIX(json, "{\"nodes\":[10],");
    EXPECT_CONTAINS(json, "all of it");
    free_str(json);

    /* Closed with a compaction running (as a crash leaves it): the next open ends it. */
    OK(inboxlog_session_begin_compaction(s, 10, 10, &json, &err)); /* 12 */
    free_str(json);
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);
    OK(inboxlog_session_open(store, "k", &s, &err));
    OK(inboxlog_session_open_report(s, &json, &err));
    EXPECT_CONTAINS(json, "\"repairedCompaction\":\"compaction-12\"");
    free_str(json);
    OK(inboxlog_session_events(s, 13, &json, &err));
    EXPECT_CONTAINS(json, "\"error\":\"interrupted\"");
    free_str(json);
    OK(inboxlog_inbox_next_turn(s, &json, &err));
    EXPECT_STR(json, "[{\"id\":\"later\"}]");
    free_str(json);
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);
    inboxlog_store_free(store);
    return 0;
}
