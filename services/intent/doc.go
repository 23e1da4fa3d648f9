// Package intent implements agentmesh.intent.v1.IntentService: it turns a user's message into a
// goal, constraints, a task type and a tool policy.
//
// Without a model (the default) it applies deterministic rules, so that the same message always
// yields the same contract. With one (Options.Model, config models.intent), after rules 1–3 it
// asks the model, through the generation service, to call ModelTool with arguments of
// ModelSchema: goal, constraints, task_type, needs_clarification with clarification_question,
// unsafe with unsafe_reason. Its goal, constraints, task type and clarification replace rules
// 4, 5, 6 and 8; unsafe is INTENT_UNSAFE with its reason. When the model fails or answers
// outside the schema (no call, arguments the schema refuses, a goal of white space only, a
// flag without its text, an answer the provider's content filter stopped), rules 4–8 parse
// the message and fallback_reason says why (source says which parsed it). The tool policy
// (rule 7, Monolith's ContractFactory) is never the model's: it is decided by the rules on the
// cleaned message, whatever the model says. The model answers within Options.ModelTimeout
// (DefaultModelTimeout, a minute, when 0; a caller without a deadline is not held longer) and
// within four fifths of the caller's time, so that the rules' parse of a slow model's message
// still reaches the caller.
// The model's request is in the response's accounting (in the INTENT_UNSAFE error's, when it
// refused).
//
// Parse applies these rules, in order:
//
//  1. Input. A message that is empty or only whitespace is INVALID_INPUT ("message must not be
//     empty"); one longer than Options.MaxMessageBytes (default 64 KiB) is INVALID_INPUT naming
//     its size and the limit. An unknown surface value is INVALID_INPUT, and so are more than
//     1,000 available tools (toolname.MaxRequestTools, the planning stage's limit) and an
//     available tool's name over 512 bytes (toolname.MaxRequestBytes). The attachments, which
//     the stage does not read, are checked as its other inputs (checkAttachments): at most
//     100, each name and mime_type at most 255 bytes, the mime_type a media type, the uri at
//     most 8,000 bytes and absolute, content inline or a uri but not both, and inline content
//     of at most Options.MaxAttachmentBytes (16 MiB) in all.
//  2. Unsafe. A message matching the deny-list (see denyList) is INTENT_UNSAFE. The list is
//     deliberately small and precise: instructions to build explosives or chemical/biological
//     weapons, to write malware, to destroy the host ("rm -rf /", mkfs or dd onto a disk, a
//     fork bomb) and to steal credentials. Asking about these topics ("how does ransomware
//     work?", "make a bath bomb", "rm -rf ./build") passes.
//  3. Unclear. A message without a single letter or digit ("???", "...") is INTENT_UNCLEAR.
//  4. Goal. The message trimmed, with runs of whitespace collapsed within each line, blank
//     lines dropped (a request's lines are its list items or steps, which the planning stage
//     splits a goal at), and polite openers removed ("please", "kindly", "can you", "could
//     you", "would you", "will you", "I want/need/would like you to", with the comma or colon
//     after them, and a trailing ", please"). If cleaning leaves nothing, the goal echoes the
//     trimmed message, so it is never empty.
//  5. Task type, first rule that fires:
//     action — a request to act outside the conversation, which needs a tool (planning finds
//     no viable plan for it without one): the goal starts with a verb that acts on the world
//     (delete, remove, run, execute, send, search, fetch, install, deploy, rename, move, copy,
//     save, download, upload, open, set, schedule, book), whatever it acts with ("send the
//     summary to Bob", "save a poem to poem.txt");
//     analysis — a cue word anywhere: analyze/analyse/analysis, compare/comparison,
//     summarize/summarise/summary, evaluate, assess, critique, "explain why", "pros and cons";
//     creative — a cue word anywhere: poem, story, song, lyrics, haiku, limerick, imagine,
//     compose, fiction;
//     action — also a goal that starts with a verb whose request text can answer (create, add, calculate, compute, build, update, edit, list, convert, check,
//     find, get, show, make) and names something outside the conversation to work on: a path,
//     a file, a directory or folder, a repository, a database, a branch, a web address, or,
//     unless the message gives its material after a colon, the user's own data (their inbox,
//     mail, messages, calendar, meetings, events, contacts, tasks, reminders, notes,
//     documents, photos, orders, bookings, accounts, servers or files: "list my meetings";
//     "check my notes: …" is not); the verb is the word itself, not the first part of a
//     compound such as "run-time". A goal that asks to write to a file is an action too (a
//     sentence that opens with what, which, who, when, where, why, how or explain, or says
//     "how" before the cue, asks for an explanation: "how do I write a file in Go?" is a
//     question). "List three benefits of exercise", "show me how closures work" and
//     "calculate 17 * 23" are questions, which need no tool;
//     creative — the goal starts with "write" or "draft" (new text that is not a file);
//     question — everything else (question marks, wh-words and plain statements alike).
//  6. Constraints, in order of appearance, each the phrase as written: "in N words",
//     "in N sentences" (also paragraphs, lines, bullet points, characters, optionally "under",
//     "at most", "fewer than", "less than", "no more than"); "without …", "using …",
//     "only …" (not "the only …"), "must …", "don't/do not/never …" (up to the next punctuation
//     or "then"/"but"); "no" and an available tool's name or "tools" ("no calculator", "no
//     web search", "no tools"; "no" before anything else is too common to be one); "as
//     JSON", "as markdown", "as a table", "as a list", "as CSV", "as YAML", "in
//     JSON/markdown/CSV/YAML format". A phrase inside an earlier one is not repeated.
//  7. Tool policy (Monolith §Phase 2b ContractFactory defaults), with policy_reason naming the
//     rule that fired:
//     surface CHAT → FORBIDDEN;
//     surface CODE with explicit workspace intent → REQUIRED: the message mentions a file path
//     ("src/main.go", "./build") or a file name with a known extension ("main.go",
//     "Makefile"), starts with a command verb (run, execute, install, build, compile, test,
//     lint; not "test-driven"), or, in a sentence that does not ask for an explanation (as
//     task types read it), contains a `backticked` command or asks to edit, create, delete,
//     modify, rename, move, update, write or fix a file, directory or folder ("how do I write
//     a file in Go?" and "what does `defer` do?" are Monolith's code page
//     conceptual/explanatory prompts);
//     any surface but CHAT where the message explicitly asks for one of available_tools by name
//     → REQUIRED: a clause opens with a verb of use aimed at it ("use the calculator to add 2
//     and 3", "call current_time", "you should use web search"), or a request names it as its
//     means ("check with the current time tool", "look this up via web search"); a clause that
//     is a question or a statement ("is a calculator allowed?", "what's wrong with the
//     calculator?", "did you call current_time?") or asks not to use it ("don't use the
//     calculator", "without web search") merely mentions it;
//     otherwise → OPTIONAL.
//  8. Clarification. A message of at most four words, all from a small vocabulary of vague
//     words ("help", "do it", "fix this", "make it work"), sets needs_clarification and a
//     clarification_question quoting the message.
package intent
