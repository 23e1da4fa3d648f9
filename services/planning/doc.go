// Package planning implements agentmesh.planning.v1.PlanningService: it breaks a goal into an
// acyclic plan of at most max_steps steps that uses only available tools.
//
// An empty goal, a goal over Options.MaxGoalBytes (default 64 KiB), a negative max_steps, an
// unknown task_type, or an available tool without a name or listed twice is INVALID_INPUT.
// max_steps 0 means Options.DefaultMaxSteps (default 20, "Max 20 steps (configurable)").
//
// A request with proposed_steps (a plan made elsewhere, e.g. by a model) is validated and
// normalised: ids and dependencies are trimmed, dependencies deduplicated, and the steps are
// returned in a stable topological order (a step comes after everything it depends on, and
// otherwise keeps its proposed position). A step without an id, a repeated id or a dependency on
// an unknown step is INVALID_INPUT; more steps than max_steps is PLAN_TOO_COMPLEX; a tool that is
// not available, or a dependency cycle ("circular dependency: a → b → a", read "a depends on b,
// which depends on a"), is NO_VIABLE_PLAN.
//
// Without proposed_steps, the plan is generated deterministically from the goal:
//
//   - The goal is split into clauses at line breaks (numbered "1." / "1)" and bulleted "-", "*",
//     "•" items alike), at ";" and at " then " / " and then ". Leading "first", "next",
//     "then", "finally" and "after that" are dropped. The text a request gives after a
//     colon ("summarize this article: …", "proofread: …") is the material of the clause
//     before the colon, whatever separators it holds, unless that clause announces steps
//     ("do the following: …", "follow these steps: …", "tasks: …"). A clause that reads as
//     code (it has a brace, a bracket, "=", "<", ">", "&&", "||" or a word directly followed
//     by "(") is no step of its own either: it stays with the clause before it, so code
//     pasted into a request ("why does this not compile? int x = 1; f(x); …") is the
//     material of one step.
//   - More clauses than max_steps is PLAN_TOO_COMPLEX.
//   - Each clause becomes a step "step-N" that depends on the previous one. Its tool is the
//     available tool whose keywords overlap the clause most: words of the tool name (split on
//     "_" and "-") score 2, words of its description 1, after dropping stop words and light
//     stemming ("calculate" matches "calculator"); ties go to the tool listed first. No overlap
//     makes a reasoning step with an empty tool_name, so a plain question is one reasoning step.
//   - A tool named in a negative constraint ("without web_search", "don't use the calculator")
//     is never chosen, and no tool is after one that rules out tools in general ("without
//     tools", "don't use any tools", "never call a tool"), but those it names as an
//     exception ("don't use tools other than the calculator").
//   - An "action" task (the intent stage's request to act outside the conversation, which
//     takes a tool) with no available tools at all, or whose negative constraints rule out
//     every available tool, is NO_VIABLE_PLAN. Any other task needs no tool: without one it is
//     planned as reasoning steps.
//
// With Options.Model (config models.planning), a plan is asked of the planning model instead,
// through the generation service (pkg/ask): a forced call of submit_plan whose arguments, a
// JSON object of planSchema, are a dependency graph of steps (id, description, tool,
// depends_on), requires_human_approval, estimated_steps, and viable with a reason. The model's
// plan is validated like proposed steps. The model saying the goal is not viable is
// NO_VIABLE_PLAN, and a plan over the step limit PLAN_TOO_COMPLEX; a failed request or an
// unusable answer (outside the schema, stopped by the provider's content filter, a tool that
// is not available, a cycle, a broken dependency) falls back to the rules, with the reason in
// fallback_reason and a warning logged. The model's request is in the response's accounting,
// or in the failure's status details.
//
// A request with a revision revises a run's plan: the model gets the plan so far with each
// step's state and the reason, and its revision must keep every step that is done as it was
// (same id, description and tool); one that rewrites or drops a done step is unusable, and the
// rules revise the plan instead. By the rules, the steps keep their ids, order and
// dependencies, and a step that is not done and uses a tool that failed is matched again
// against the other usable tools (a reasoning step when none overlaps it).
//
// Either way requires_human_approval is set when the tool of a step still to do requires
// approval (a revision's done steps ran already) or the planning model says so, and
// estimated_steps is the model's estimate, or the number of steps still to do plus one for the
// final answer turn.
package planning
