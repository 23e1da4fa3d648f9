package intent_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	intentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/intent/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/grpctest"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
	"github.com/agentmesh/agentmesh/services/intent"
	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	question = intentv1.TaskType_TASK_TYPE_QUESTION
	action   = intentv1.TaskType_TASK_TYPE_ACTION
	creative = intentv1.TaskType_TASK_TYPE_CREATIVE
	analysis = intentv1.TaskType_TASK_TYPE_ANALYSIS

	required  = typev1.ToolPolicy_TOOL_POLICY_REQUIRED
	optional  = typev1.ToolPolicy_TOOL_POLICY_OPTIONAL
	forbidden = typev1.ToolPolicy_TOOL_POLICY_FORBIDDEN

	api  = typev1.Surface_SURFACE_API
	chat = typev1.Surface_SURFACE_CHAT
	code = typev1.Surface_SURFACE_CODE
)

func client(t *testing.T, opts intent.Options) intentv1.IntentServiceClient {
	t.Helper()
	return intentv1.NewIntentServiceClient(grpctest.Serve(t, intent.New(opts).Register))
}

func TestParse(t *testing.T) {
	tools := []string{"calculator", "current_time", "fs__read_file", "web-search"}
	table := []struct {
		name        string
		message     string
		surface     typev1.Surface
		goal        string
		taskType    intentv1.TaskType
		constraints []string
		policy      typev1.ToolPolicy
		reason      string // substring of policy_reason
		clarify     bool
	}{
		{name: "plain question", message: "What is the capital of France?", goal: "What is the capital of France?",
			taskType: question, policy: optional, reason: "api surface"},
		{name: "polite question cleaned", message: "  Could you   tell me\tthe time in Tokyo?  ", goal: "tell me the time in Tokyo?",
			taskType: question, policy: optional},
		{name: "numbered lines stay apart", message: "Please:\n 1.  look up   the holiday policy\n\n2) work out 3 * 7  \n", goal: "1. look up the holiday policy\n2) work out 3 * 7",
			taskType: question, policy: optional},
		{name: "a constraint ends with its line", message: "1. Explain closures without jargon\n2. Explain goroutines", goal: "1. Explain closures without jargon\n2. Explain goroutines",
			taskType: question, constraints: []string{"without jargon"}, policy: optional},
		{name: "no and a tool is a constraint", message: "Work out 17 * 23, no calculator, and tell me the current time with no web search",
			goal: "Work out 17 * 23, no calculator, and tell me the current time with no web search", taskType: question,
			constraints: []string{"no calculator", "no web search"}, policy: optional},
		{name: "no tools is a constraint", message: "Summarize Hamlet, no tools", goal: "Summarize Hamlet, no tools", taskType: analysis,
			constraints: []string{"no tools"}, policy: optional},
		{name: "no before anything else is not", message: "There is no time to lose: what is 2 + 2?", goal: "There is no time to lose: what is 2 + 2?",
			taskType: question, policy: optional},
		{name: "a world verb beats an analysis cue", message: "Send the summary to Bob", goal: "Send the summary to Bob", taskType: action, policy: optional},
		{name: "a world verb beats a creative cue", message: "Save a poem about autumn to poem.txt", goal: "Save a poem about autumn to poem.txt", taskType: action, policy: optional},
		{name: "stacked openers and closer", message: "Please, can you send the weekly report to Bob, please.", goal: "send the weekly report to Bob.",
			taskType: action, policy: optional},
		{name: "opener only echoes input", message: "  please  ", goal: "please", taskType: question, policy: optional, clarify: true},
		{name: "imperative action", message: "Delete the file report.txt", goal: "Delete the file report.txt", taskType: action, policy: optional},
		{name: "calculation is answered in text", message: "Calculate 17 * 23", goal: "Calculate 17 * 23", taskType: question, policy: optional},
		{name: "list is answered in text", message: "List three benefits of exercise", goal: "List three benefits of exercise", taskType: question, policy: optional},
		{name: "show me how is answered in text", message: "Show me how closures work", goal: "Show me how closures work", taskType: question, policy: optional},
		{name: "make a list is answered in text", message: "Make a list of five fruits", goal: "Make a list of five fruits", taskType: question, policy: optional},
		{name: "given material is answered in text", message: "Check my grammar: me go store", goal: "Check my grammar: me go store", taskType: question, policy: optional},
		{name: "listing files is action", message: "List the files in ./src", goal: "List the files in ./src", taskType: action, policy: optional},
		{name: "converting a file is action", message: "Convert data.csv to YAML", goal: "Convert data.csv to YAML", taskType: action, policy: optional},
		{name: "showing a web page is action", message: "Show me the title of https://go.dev", goal: "Show me the title of https://go.dev", taskType: action, policy: optional},
		{name: "creating a branch is action", message: "Create a branch called fix-login", goal: "Create a branch called fix-login", taskType: action, policy: optional},
		{name: "checking the user's things is action", message: "Check my inbox for invoices", goal: "Check my inbox for invoices", taskType: action, policy: optional},
		{name: "the user's options are answered in text", message: "Show me my options for learning Go", goal: "Show me my options for learning Go", taskType: question, policy: optional},
		{name: "the user's recent orders are action", message: "List my recent orders", goal: "List my recent orders", taskType: action, policy: optional},
		{name: "given notes are answered in text", message: "Check my notes: water boils at 90C", goal: "Check my notes: water boils at 90C", taskType: question, policy: optional},
		{name: "a time is no given material", message: "Check my calendar at 10:30", goal: "Check my calendar at 10:30", taskType: action, policy: optional},
		{name: "search action", message: "search the web for Go 1.26 release notes", goal: "search the web for Go 1.26 release notes",
			taskType: action, policy: optional},
		{name: "write a file is action", message: "Write the results to a file called out.txt", goal: "Write the results to a file called out.txt",
			taskType: action, policy: optional},
		{name: "write an email is creative", message: "Write an email to my landlord about the heating", goal: "Write an email to my landlord about the heating",
			taskType: creative, policy: optional},
		{name: "poem with length constraint", message: "Write a poem about autumn in 4 lines", goal: "Write a poem about autumn in 4 lines",
			taskType: creative, constraints: []string{"in 4 lines"}, policy: optional},
		{name: "imagine", message: "Imagine a city on Mars", goal: "Imagine a city on Mars", taskType: creative, policy: optional},
		{name: "summary with constraints", message: "Summarize this article in 3 sentences without jargon, as markdown",
			goal: "Summarize this article in 3 sentences without jargon, as markdown", taskType: analysis,
			constraints: []string{"in 3 sentences", "without jargon", "as markdown"}, policy: optional},
		{name: "compare", message: "Compare PostgreSQL and MySQL for analytics as a table", goal: "Compare PostgreSQL and MySQL for analytics as a table",
			taskType: analysis, constraints: []string{"as a table"}, policy: optional},
		{name: "explain why", message: "Explain why the build is slow", goal: "Explain why the build is slow", taskType: analysis, policy: optional},
		{name: "analysis beats creative", message: "Summarize the story of Hamlet", goal: "Summarize the story of Hamlet", taskType: analysis, policy: optional},
		{name: "must and dont", message: "Don't use external libraries; it must compile on Go 1.26",
			goal: "Don't use external libraries; it must compile on Go 1.26", taskType: question,
			constraints: []string{"Don't use external libraries", "must compile on Go 1.26"}, policy: optional},
		{name: "using and only", message: "Sort the list using only the standard library, then print it",
			goal: "Sort the list using only the standard library, then print it", taskType: question,
			constraints: []string{"using only the standard library"}, policy: optional},
		{name: "only as a constraint", message: "Reply only with the number", goal: "Reply only with the number",
			taskType: question, constraints: []string{"only with the number"}, policy: optional},
		{name: "the only is not a constraint", message: "What is the only planet with rings?", goal: "What is the only planet with rings?",
			taskType: question, policy: optional},
		{name: "must I is not a constraint", message: "What must I do to renew a passport?", goal: "What must I do to renew a passport?",
			taskType: question, policy: optional},
		{name: "do not and then", message: "Fetch the page, do not follow redirects and then show the title",
			goal: "Fetch the page, do not follow redirects and then show the title", taskType: action,
			constraints: []string{"do not follow redirects"}, policy: optional},
		{name: "in JSON format", message: "list my meetings in JSON format", goal: "list my meetings in JSON format",
			taskType: action, constraints: []string{"in JSON format"}, policy: optional},

		{name: "chat forbids tools", message: "Use the calculator to add 2 and 3", surface: chat, goal: "Use the calculator to add 2 and 3",
			taskType: question, policy: forbidden, reason: "chat surface"},
		{name: "chat forbids even file work", message: "Edit main.go", surface: chat, goal: "Edit main.go",
			taskType: action, policy: forbidden, reason: "chat surface"},
		{name: "api asks for tool by name", message: "Use the calculator to add 2 and 3", surface: api, goal: "Use the calculator to add 2 and 3",
			taskType: question, policy: required, reason: `tool "calculator"`},
		{name: "unspecified surface calls tool", message: "call current_time and tell me", goal: "call current_time and tell me",
			taskType: question, policy: required, reason: `tool "current_time"`},
		{name: "tool by spaced name", message: "What time is it? Check with the current time tool", goal: "What time is it? Check with the current time tool",
			taskType: question, policy: required, reason: `tool "current_time"`},
		{name: "tool without server prefix", message: "use read file on the notes", goal: "use read file on the notes",
			taskType: question, policy: required, reason: `tool "fs__read_file"`},
		{name: "hyphenated tool", message: "look this up via web search", goal: "look this up via web search",
			taskType: question, policy: required, reason: `tool "web-search"`},
		{name: "mentioning a tool is not asking for it", message: "Is a calculator allowed in the exam?", goal: "Is a calculator allowed in the exam?",
			taskType: question, policy: optional},
		{name: "unknown tool name", message: "use the stapler", goal: "use the stapler", taskType: question, policy: optional},
		{name: "a question about a tool is not asking for it", message: "What's wrong with the calculator?", surface: api,
			goal: "What's wrong with the calculator?", taskType: question, policy: optional},
		{name: "asking not to use a tool", message: "Don't use the calculator, just tell me 6 times 7", surface: api,
			goal: "Don't use the calculator, just tell me 6 times 7", taskType: question, constraints: []string{"Don't use the calculator"}, policy: optional},
		{name: "without using a tool", message: "Work out 12 * 12 without using the calculator", surface: api,
			goal: "Work out 12 * 12 without using the calculator", taskType: question, constraints: []string{"without using the calculator"}, policy: optional},
		{name: "asking whether a tool was used", message: "Did you call current_time?", goal: "Did you call current_time?", taskType: question, policy: optional},
		{name: "a tool's name as a modifier", message: "Help me with the calculator homework", goal: "Help me with the calculator homework",
			taskType: question, policy: optional},
		{name: "a tool as the means of a request", message: "Please work out 2+3 using the calculator", goal: "work out 2+3 using the calculator",
			taskType: question, constraints: []string{"using the calculator"}, policy: required, reason: `tool "calculator"`},
		{name: "a tool asked for in a later clause", message: "Add 2 and 3, then use the calculator to check", goal: "Add 2 and 3, then use the calculator to check",
			taskType: question, policy: required, reason: `tool "calculator"`},
		{name: "you should use a tool", message: "You should use web search for this", goal: "You should use web search for this",
			taskType: question, policy: required, reason: `tool "web-search"`},

		{name: "code with file", message: "Fix the nil check in handler.go", surface: code, goal: "Fix the nil check in handler.go",
			taskType: question, policy: required, reason: `file "handler.go"`},
		{name: "code with path", message: "Look at ./internal/server and tidy it", surface: code, goal: "Look at ./internal/server and tidy it",
			taskType: question, policy: required, reason: `path "./internal/server"`},
		{name: "code with nested path", message: "what does pkg/stageerr/status do", surface: code, goal: "what does pkg/stageerr/status do",
			taskType: question, policy: required, reason: "path"},
		{name: "code with Makefile", message: "Add a lint target to the Makefile", surface: code, goal: "Add a lint target to the Makefile",
			taskType: action, policy: required, reason: `file "Makefile"`},
		{name: "code run command", message: "Run the tests", surface: code, goal: "Run the tests", taskType: action,
			policy: required, reason: "asks to run a command"},
		{name: "code install command", message: "please install the dependencies", surface: code, goal: "install the dependencies",
			taskType: action, policy: required, reason: "asks to install a command"},
		{name: "code backticked command", message: "Make `go vet ./...` pass", surface: code, goal: "Make `go vet ./...` pass",
			taskType: action, policy: required, reason: "contains the command `go vet ./...`"},
		{name: "code question about a command here", message: "What does `go vet ./...` report here?", surface: code, goal: "What does `go vet ./...` report here?",
			taskType: question, policy: required, reason: `path "./..."`},
		{name: "code backticked keyword in a conceptual question", message: "What does `defer` do in Go?", surface: code,
			goal: "What does `defer` do in Go?", taskType: question, policy: optional, reason: "code surface without"},
		{name: "code backticked command explained", message: "Explain how `git rebase` works", surface: code,
			goal: "Explain how `git rebase` works", taskType: question, policy: optional},
		{name: "code how to inside a request for an explanation", message: "Tell me how to rename a file in bash", surface: code,
			goal: "Tell me how to rename a file in bash", taskType: question, policy: optional},
		{name: "code file edit", message: "Create a new file for the config loader", surface: code, goal: "Create a new file for the config loader",
			taskType: action, policy: required, reason: "change a file"},
		{name: "code conceptual", message: "Explain how goroutines are scheduled", surface: code, goal: "Explain how goroutines are scheduled",
			taskType: question, policy: optional, reason: "code surface without"},
		{name: "code framework is not a file", message: "How does the node.js event loop differ from Go's scheduler?", surface: code,
			goal: "How does the node.js event loop differ from Go's scheduler?", taskType: question, policy: optional},
		{name: "code either/or is not a path", message: "Should I use TCP/IP sockets or gRPC?", surface: code,
			goal: "Should I use TCP/IP sockets or gRPC?", taskType: question, policy: optional},
		{name: "code how-to question about files is conceptual", message: "How do I write a file in Go?", surface: code,
			goal: "How do I write a file in Go?", taskType: question, policy: optional, reason: "code surface without"},
		{name: "code why question about deleting files is conceptual", message: "Why would you delete a directory with os.RemoveAll instead of os.Remove?", surface: code,
			goal: "Why would you delete a directory with os.RemoveAll instead of os.Remove?", taskType: question, policy: optional},
		{name: "code file edit after a question", message: "What's wrong here? Fix the config file", surface: code,
			goal: "What's wrong here? Fix the config file", taskType: question, policy: required, reason: "change a file"},
		{name: "code compound of a command verb is not a command", message: "Test-driven development: what is it?", surface: code,
			goal: "Test-driven development: what is it?", taskType: question, policy: optional},
		{name: "code run-time is not a command", message: "run-time vs compile-time errors, what is the difference?", surface: code,
			goal: "run-time vs compile-time errors, what is the difference?", taskType: question, policy: optional},
		{name: "code command verb with punctuation", message: "Test: the parser package", surface: code,
			goal: "Test: the parser package", taskType: question, policy: required, reason: "asks to test a command"},
		{name: "code named tool", message: "call current_time", surface: code, goal: "call current_time", taskType: question,
			policy: required, reason: `tool "current_time"`},

		{name: "vague help", message: "help", goal: "help", taskType: question, policy: optional, clarify: true},
		{name: "vague do it", message: "Do it!", goal: "Do it!", taskType: question, policy: optional, clarify: true},
		{name: "vague fix this", message: "please fix this", goal: "fix this", taskType: question, policy: optional, clarify: true},
		{name: "vague make it work", message: "make it work", goal: "make it work", taskType: question, policy: optional, clarify: true},
		{name: "specific fix is clear", message: "fix main.go", surface: code, goal: "fix main.go", taskType: question, policy: required},
		{name: "specific help is clear", message: "help me plan a trip to Rome", goal: "help me plan a trip to Rome", taskType: question, policy: optional},
	}
	c := client(t, intent.Options{})
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Parse(t.Context(), &intentv1.ParseRequest{
				Message: tc.message, ConversationId: "conv-1", Surface: tc.surface, AvailableTools: tools,
			})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if resp.GetGoal() != tc.goal {
				t.Errorf("goal = %q, want %q", resp.GetGoal(), tc.goal)
			}
			if resp.GetTaskType() != tc.taskType {
				t.Errorf("task_type = %v, want %v", resp.GetTaskType(), tc.taskType)
			}
			if !slices.Equal(resp.GetConstraints(), tc.constraints) {
				t.Errorf("constraints = %q, want %q", resp.GetConstraints(), tc.constraints)
			}
			if resp.GetToolPolicy() != tc.policy {
				t.Errorf("tool_policy = %v (%s), want %v", resp.GetToolPolicy(), resp.GetPolicyReason(), tc.policy)
			}
			if resp.GetPolicyReason() == "" || !strings.Contains(resp.GetPolicyReason(), tc.reason) {
				t.Errorf("policy_reason = %q, want it to contain %q", resp.GetPolicyReason(), tc.reason)
			}
			if resp.GetNeedsClarification() != tc.clarify {
				t.Errorf("needs_clarification = %v, want %v", resp.GetNeedsClarification(), tc.clarify)
			}
			if tc.clarify != (resp.GetClarificationQuestion() != "") {
				t.Errorf("clarification_question = %q with needs_clarification %v", resp.GetClarificationQuestion(), tc.clarify)
			}
			if tc.clarify && !strings.Contains(resp.GetClarificationQuestion(), resp.GetGoal()) {
				t.Errorf("clarification_question %q does not quote the goal %q", resp.GetClarificationQuestion(), resp.GetGoal())
			}
		})
	}
}

func TestParseFailures(t *testing.T) {
	c := client(t, intent.Options{MaxMessageBytes: 32})
	table := []struct {
		name    string
		req     *intentv1.ParseRequest
		grpc    codes.Code
		code    typev1.StageErrorCode
		message string
	}{
		{"empty", &intentv1.ParseRequest{}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "message must not be empty"},
		{"whitespace", &intentv1.ParseRequest{Message: " \n\t "}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "message must not be empty"},
		{"too long", &intentv1.ParseRequest{Message: strings.Repeat("a", 33)}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "message is 33 bytes, the limit is 32 bytes"},
		{"unknown surface", &intentv1.ParseRequest{Message: "hi", Surface: 42}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "unknown surface 42"},
		{"run id over 128 bytes", &intentv1.ParseRequest{Message: "hi", RunId: strings.Repeat("r", 129)}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "run_id: run id is 129 bytes long; at most 128 are allowed"},
		{"run id with a space", &intentv1.ParseRequest{Message: "hi", RunId: "run 1"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `run_id: run id "run 1" contains ' ' at byte 3`},
		// The public API's limit for a conversation (Run, Decide): the intent stage logs it.
		{"conversation id over 256 bytes", &intentv1.ParseRequest{Message: "hi", ConversationId: strings.Repeat("c", 257)}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "conversation_id: at most 256 bytes, got 257"},
		// The public API's rule for a conversation: no control character (auth.CheckControl).
		{"conversation id with NUL", &intentv1.ParseRequest{Message: "hi", ConversationId: "c\x00"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `conversation_id: must not contain a control character; got '\x00' at byte 1`},
		{"conversation id with CSI", &intentv1.ParseRequest{Message: "hi", ConversationId: "c\u009b31m"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, `conversation_id: must not contain a control character; got '\u009b' at byte 1`},
		// The public API's limit for a user (auth.MaxIDBytes), as every other stage's.
		{"user id over 256 bytes", &intentv1.ParseRequest{Message: "hi", UserId: strings.Repeat("u", 257)}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "user_id: at most 256 bytes, got 257"},
		// The limit of a tool name in a request to a stage (toolname.MaxRequestBytes).
		{"available tool over 512 bytes", &intentv1.ParseRequest{Message: "hi", AvailableTools: []string{"calculator", strings.Repeat("t", 513)}}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "available_tools[1]: at most 512 bytes, got 513"},
		{"question marks", &intentv1.ParseRequest{Message: "???"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR, "no letters or digits"},
		{"dots", &intentv1.ParseRequest{Message: " ... "}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR, "no letters or digits"},
		{"symbols", &intentv1.ParseRequest{Message: "!!! -- :) ?!"}, codes.InvalidArgument, typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNCLEAR, "no letters or digits"},
		{"unsafe", &intentv1.ParseRequest{Message: "how to make a pipe bomb"}, codes.PermissionDenied, typev1.StageErrorCode_STAGE_ERROR_CODE_INTENT_UNSAFE, "explosives"},
	}
	for _, tc := range table {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Parse(t.Context(), tc.req)
			if got := status.Code(err); got != tc.grpc {
				t.Fatalf("grpc code = %v (%v), want %v", got, err, tc.grpc)
			}
			se := stageerr.FromError(err)
			if se.Code != tc.code {
				t.Errorf("stage code = %v, want %v", se.Code, tc.code)
			}
			if !strings.Contains(se.Msg, tc.message) {
				t.Errorf("message = %q, want it to contain %q", se.Msg, tc.message)
			}
		})
	}
}

// TestConversationIDAtTheLimit: a conversation id of MaxConversationIDBytes, the public API's
// limit, is taken (TestParseFailures refuses one byte more).
func TestConversationIDAtTheLimit(t *testing.T) {
	c := client(t, intent.Options{})
	id := strings.Repeat("c", intent.MaxConversationIDBytes)
	if _, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "What is 6 times 7?", ConversationId: id}); err != nil {
		t.Fatalf("a conversation_id of %d bytes was refused: %v", len(id), err)
	}
}

// TestUserIDAtTheLimit: a user id of auth.MaxIDBytes, the public API's limit, is taken
// (TestParseFailures refuses one byte more).
func TestUserIDAtTheLimit(t *testing.T) {
	c := client(t, intent.Options{})
	id := strings.Repeat("u", auth.MaxIDBytes)
	if _, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "What is 6 times 7?", UserId: id}); err != nil {
		t.Fatalf("a user_id of %d bytes was refused: %v", len(id), err)
	}
}

func TestDefaultSizeLimit(t *testing.T) {
	c := client(t, intent.Options{})
	limit := intent.DefaultMaxMessageBytes
	if _, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: strings.Repeat("a", limit)}); err != nil {
		t.Fatalf("a message of exactly %d bytes was refused: %v", limit, err)
	}
	_, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: strings.Repeat("a", limit+1)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "the limit is 65536 bytes") {
		t.Fatalf("over-long message: %v", err)
	}
}

// TestAvailableToolsCount: a request offers at most 1,000 tools, the planning stage's limit of
// the same list (toolname.MaxRequestTools): one more is refused naming the field and the limit
// before the rules match the message against each; the limit itself is taken.
func TestAvailableToolsCount(t *testing.T) {
	c := client(t, intent.Options{})
	tools := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("tool_%d", i)
		}
		return out
	}
	if _, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "Use tool_7 to add 2 and 3",
		AvailableTools: tools(1000)}); err != nil {
		t.Fatalf("1000 tools were refused: %v", err)
	}
	_, err := c.Parse(t.Context(), &intentv1.ParseRequest{Message: "Use tool_7 to add 2 and 3",
		AvailableTools: tools(1001)})
	grpctest.WantStageError(t, err, codes.InvalidArgument,
		typev1.StageErrorCode_STAGE_ERROR_CODE_INVALID_INPUT, "available_tools: at most 1000, got 1001")
}
