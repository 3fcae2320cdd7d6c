/* Approvals through the C ABI (SPEC §17): a host asks for a person's approval of a tool
 * call and parks its turn; another store handle (any process) rejects it; the session,
 * reopened, takes the parked turn up instead of interrupting it, and the call is
 * answered TOOL_NOT_ALLOWED before the run is handed on once. */
#define _POSIX_C_SOURCE 200809L

#include "check.h"

static void free_str(char *s) { inboxlog_string_free(s); }

static const char USER[] =
    "{\"id\":\"u1\",\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"delete x\"}]}";

static const char CALLING[] =
    "{\"turn\":1,\"step\":1,\"message\":{\"id\":\"a1\",\"role\":\"assistant\",\"content\":["
    "{\"type\":\"tool-call\",\"id\":\"call-1\",\"name\":\"rm\",\"arguments\":\"{\\\"path\\\":\\\"x\\\"}\"}],"
    "\"source\":{\"kind\":\"model\",\"provider\":\"c\",\"model\":\"host\"}}}";

int main(void) {
    char root[] = "/tmp/inboxlog-c-approvals-XXXXXX";
    inboxlog_store *store = NULL, *other = NULL;
    inboxlog_session *s = NULL;
    char *json = NULL, *post = NULL;
    uint64_t turn = 0;
    bool again = false;

    if (mkdtemp(root) == NULL) FAIL("mkdtemp failed");
    OK(inboxlog_store_open_jsonl(root, "sync", &store, &err));
    OK(inboxlog_session_create(store, "hitl", NULL, &s, &err));
    OK(inboxlog_inbox_append(s, "next-turn", USER, &err));
    /* No turn: asking is refused, nothing written. */
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "idle",
                  inboxlog_session_ask_approval(s, "{\"id\":\"ap-1\",\"toolName\":\"rm\"}", &err));
    OK(inboxlog_session_open_turn(s, NULL, &turn, &err));
    OK(inboxlog_session_propose_step(s, &json, &err));
    free_str(json);
    OK(inboxlog_session_decide(s, "{\"kind\":\"enter\",\"messages\":[{\"id\":\"u1\",\"role\":\"user\","
                                  "\"content\":[{\"type\":\"text\",\"text\":\"delete x\"}]}]}",
                               NULL, &json, &err));
    free_str(json);
    OK(inboxlog_session_append(s, "assistant/message", CALLING, NULL, &json, &err));
    free_str(json);
    OK(inboxlog_session_append(s, "tool/call",
                               "{\"turn\":1,\"step\":1,\"callId\":\"call-1\",\"name\":\"rm\",\"arguments\":\"{}\"}",
                               NULL, &json, &err));
    free_str(json);

    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "toolName",
                  inboxlog_session_ask_approval(s, "{\"id\":\"ap-1\",\"tool\":\"rm\"}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "no pending approval", inboxlog_session_park(s, NULL, &err));
    OK(inboxlog_session_ask_approval(
        s, "{\"id\":\"ap-1\",\"toolName\":\"rm\",\"callId\":\"call-1\",\"arguments\":{\"path\":\"x\"}}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_APPROVALS_PENDING, "ap-1",
                  inboxlog_session_end_step(s, "continue", NULL, &again, &err));
    OK(inboxlog_session_park(s, "{\"resume\":\"here\"}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "parked",
                  inboxlog_session_append(s, "host/x", "{}", NULL, NULL, &err));
    OK(inboxlog_session_approvals(s, &json, &err));
    EXPECT_CONTAINS(json, "\"parked\":{\"turn\":1,\"approvals\":[\"ap-1\"],\"ready\":false}");
    EXPECT_CONTAINS(json, "\"callId\":\"call-1\"");
    free_str(json);
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);

    /* Another handle decides, as any process would. */
    OK(inboxlog_store_open_jsonl(root, "sync", &other, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "outcome",
                  inboxlog_store_decide(other, "hitl", "ap-1", "maybe", &post, &err));
    OK(inboxlog_store_decide(other, "hitl", "ap-1", "rejected", &post, &err));
    free_str(post);
    inboxlog_store_free(other);

    OK(inboxlog_session_open(store, "hitl", &s, &err));
    OK(inboxlog_session_open_report(s, &json, &err));
    EXPECT_CONTAINS(json, "\"repairedTurn\":null");
    free_str(json);
    OK(inboxlog_session_surface(s, &json, &err));
    EXPECT_CONTAINS(json, "\"id\":\"not-allowed-tool-result-call-1-");
    EXPECT_CONTAINS(json, "A person rejected this tool call");
    free_str(json);
    OK(inboxlog_session_resume_parked(s, &json, &err));
    EXPECT_CONTAINS(json, "\"state\":{\"resume\":\"here\"}");
    EXPECT_CONTAINS(json, "\"decisions\":[{\"id\":\"ap-1\",\"outcome\":\"rejected\"}]");
    free_str(json);
    EXPECT_STATUS(INBOXLOG_STATUS_PROTOCOL, "not parked", inboxlog_session_resume_parked(s, &json, &err));
    EXPECT_STATUS(INBOXLOG_STATUS_ALREADY_DECIDED, "ap-1",
                  inboxlog_session_decide_approval(s, "ap-1", "allowed-once", &err));
    EXPECT_STR(inboxlog_status_name(INBOXLOG_STATUS_APPROVALS_PENDING), "approvals_pending");

    /* "Send now" from anywhere (SPEC §17.5): a pending message moved to next-step. */
    OK(inboxlog_inbox_append(s, "next-turn", "{\"id\":\"later\"}", &err));
    EXPECT_STATUS(INBOXLOG_STATUS_INVALID_INPUT, "target",
                  inboxlog_store_move_pending(store, "hitl", "later", "soon", INBOXLOG_ABSENT, &post, &err));
    OK(inboxlog_store_move_pending(store, "hitl", "later", "next-step", INBOXLOG_ABSENT, &post, &err));
    free_str(post);
    uint64_t taken = 0;
    OK(inboxlog_inbox_receive(s, &taken, &err));
    if (taken != 1) FAIL("took %llu posts in, want 1", (unsigned long long)taken);
    OK(inboxlog_inbox_next_step(s, &json, &err));
    EXPECT_CONTAINS(json, "\"later\"");
    free_str(json);
    OK(inboxlog_session_close(s, &err));
    inboxlog_session_free(s);
    inboxlog_store_free(store);
    return 0;
}
