// Package plan holds the rules every plan of the planning contract keeps (seed 003, "Plan uses
// only available tools; circular dependencies prevented; max 20 steps (configurable)"), so that
// the planning stage, which makes plans, the orchestrator, which must not accept a plan that
// breaks them from any planning stage, and the conformance kit (pkg/stagetest) check the same
// rules.
package plan
