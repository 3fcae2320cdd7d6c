/* The conversation through the C ABI (SPEC §15): a host writes a model response with
 * a tool call and dispatches the tool, then dies; reopening answers the call it left
 * without a result, and the surface says what the model sees next, read from the
 * session and from the store without owning it. Shapes and surface rules are refused
 * by name. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

static void free_str(char *s) { inboxlog_string_free(s); }

static const char CALLING[] =
    "{\"turn\":1,\"step\":1,\"message\":{\"id\":\"a1\",\"role\":\"assistant\",\"content\":["
    "{\"type\":\"text\",\"text\":\"Let me look.\"},"
    "{\"type\":\"tool-call\",\"id\":\"call-1\",\"name\":\"search\",\"arguments\":\"{\\\"q\\\":\\\"x\\\"}\"}],"
    "\"source\":{\"kind\":\"model\",\"provider\":\"c\",\"model\":\"host\"}},"
    "\"usage\":{\"inputTokens\":12,\"outputTokens\":5}}";

int main(void) {
    char root[] = "/tmp/inboxlog-c-conversation-XXXXXX";
    inboxlog_store *store = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL;
    uint64_t turn = 0;

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "chat", NULL, &s, &err));
    OK(inboxlog_inbox_append(s, "next-turn",
                             "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"find x\"}]}",
                             &err));
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    free_str(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"u1\",\"role\":\"user\","
                                  "\"content\":[{\"type\":\"text\",\"text\":\"find x\"}]}]}",
                               NULL, &json, &err));
    free_str(json);

    /* Shapes are checked on append: nothing is written. */
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "assistant/message data",
                  inboxlog_session_append(s, "assistant/message", "{\"text\":\"hi\"}", NULL, NULL, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "tool/call data",
                  inboxlog_session_append(s, "tool/call", "{\"turn\":1,\"step\":1,\"callId\":\"c\"}", NULL,
                                          NULL, &err));
    /* A surface op that breaks the rules is refused, naming the rule and the seqs. */
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "seq 40 is not on the surface",
                  inboxlog_session_append(s, "user/message", "{\"id\":\"x\"}",
                                          "{\"surfaceOp\":{\"op\":\"replace\",\"start\":40,\"end\":40},"
                                          "\"sourceEventSeqs\":[3]}",
                                          NULL, &err));

    /* The model's response (no surfaceOp given: "append"), then the tool is dispatched. */
    OK(inboxlog_session_append(s, "assistant/message", CALLING, NULL, &json, &err));
    EXPECT_CONTAINS(json, "\"surfaceOp\":\"append\"");
    free_str(json);
    OK(inboxlog_session_append(s, "tool/call",
                               "{\"turn\":1,\"step\":1,\"callId\":\"call-1\",\"name\":\"search\","
                               "\"arguments\":\"{\\\"q\\\":\\\"x\\\"}\"}",
                               NULL, &json, &err));
    EXPECT_PREFIX(json, "{\"type\":\"tool/call\",\"seq\":6,");
    free_str(json);
    OK(inboxlog_session_surface(s, &json, &err));
    EXPECT_PREFIX(json, "{\"nodes\":[4,5],\"messages\":[{\"id\":\"u1\",\"role\":\"user\"");
    EXPECT_CONTAINS(json, "{\"id\":\"a1\",\"role\":\"assistant\",\"content\":[");
    free_str(json);

    /* The host dies inside the tool: its session is released without a turn/end. */
    inboxlog_session_free(s);
    s = NULL;

    /* Read without owning: the surface as it is stored. */
    OK(inboxlog_store_surface(store, "chat", &json, &err));
    EXPECT_PREFIX(json, "{\"nodes\":[4,5],");
    free_str(json);
    OK(inboxlog_store_verify(store, "chat", &json, &err));
    EXPECT_CONTAINS(json, "\"pendingToolCalls\":1");
    free_str(json);

    /* Reopening answers the dispatched call: its outcome is unknown. */
    OK(inboxlog_session_open(store, "chat", &s, &err));
    OK(inboxlog_session_events(s, 7, &json, &err));
    EXPECT_PREFIX(json, "[{\"type\":\"tool/result\",\"seq\":7,");
    EXPECT_CONTAINS(json, "\"message\":{\"id\":\"interrupted-tool-result-call-1-7\",\"role\":\"user\"");
    EXPECT_CONTAINS(json, "\"toolCallId\":\"call-1\"");
    EXPECT_CONTAINS(json, "\"isError\":true}]");
    EXPECT_CONTAINS(json, "\"error\":{\"name\":\"ToolOutcomeUnknownError\",\"code\":\"TOOL_OUTCOME_UNKNOWN\"}}");
    EXPECT_CONTAINS(json, "\"surfaceOp\":\"append\",\"sourceEventSeqs\":[6]}");
    EXPECT_CONTAINS(json, "{\"type\":\"step/end\",\"seq\":8,");
    EXPECT_CONTAINS(json, "{\"type\":\"turn/end\",\"seq\":9,");
    EXPECT_CONTAINS(json, "\"reason\":{\"kind\":\"interrupted\"}");
    free_str(json);
    OK(inboxlog_session_surface(s, &json, &err));
    EXPECT_PREFIX(json, "{\"nodes\":[4,5,7],");
    EXPECT(count_of(json, "\"role\":") == 3);
    free_str(json);
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);

    /* Opening twice adds nothing; the store's read agrees with the session's. */
    OK(inboxlog_session_open(store, "chat", &s, &err));
    {
        int64_t last = 0;
        OK(inboxlog_session_last_seq(s, &last, &err));
        EXPECT(last == 9);
    }
    inboxlog_session_free(s);
    EXPECT_STATUS(INBOXLOG_STATUS_NOT_FOUND, "absent",
                  inboxlog_store_surface(store, "absent", &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_NULL_ARGUMENT, "store",
                  inboxlog_store_surface(NULL, "chat", &json, &err));
    inboxlog_store_free(store);
    remove_dir(root);
    return 0;
}
