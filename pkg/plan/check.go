package plan

import (
	"maps"
	"slices"
	"strings"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// DefaultMaxSteps is the step limit of a request whose max_steps is 0 (seed 003: "Max 20 steps
// (configurable)").
const DefaultMaxSteps = 20

// MaxStepsLimit is the largest step limit a planning request may set (max_steps), and so the
// most steps a plan has.
const MaxStepsLimit = 1000

// Check returns the first rule of the planning contract that steps break, in this order: a
// step without an id or with the id of an earlier step, or a dependency on a step that is not
// in the plan, is INVALID_INPUT; more than limit steps is PLAN_TOO_COMPLEX; a step whose tool
// is not in tools, or a dependency cycle ("circular dependency: a → b → a", read "a depends on
// b, which depends on a"), is NO_VIABLE_PLAN. A step without a tool is a reasoning step. Ids
// and dependencies are compared exactly as written; nil means the plan keeps every rule.
func Check(steps []*typev1.Step, tools map[string]*typev1.Tool, limit int) error {
	index := make(map[string]int, len(steps))
	for i, st := range steps {
		id := st.GetId()
		if strings.TrimSpace(id) == "" {
			return stageerr.Invalid("step %d has an empty id", i+1)
		}
		if _, dup := index[id]; dup {
			return stageerr.Invalid("duplicate step id %q", id)
		}
		index[id] = i
	}
	for _, st := range steps {
		for _, dep := range st.GetDependsOn() {
			if _, ok := index[dep]; !ok {
				return stageerr.Invalid("step %q depends on unknown step %q", st.GetId(), dep)
			}
		}
	}
	if len(steps) > limit {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PLAN_TOO_COMPLEX,
			"plan has %d steps, the limit is %d", len(steps), limit)
	}
	for _, st := range steps {
		if name := st.GetToolName(); name != "" && tools[name] == nil {
			return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
				"step %q uses tool %q, which is not available (%s)", st.GetId(), name, available(tools))
		}
	}
	if cycle := findCycle(steps, index); cycle != nil {
		return stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NO_VIABLE_PLAN,
			"circular dependency: %s", strings.Join(cycle, " → "))
	}
	return nil
}

// Ordered returns an INVALID_INPUT error naming the first step that comes before a step it
// depends on, or nil when steps are in an executable (topological) order. It assumes Check
// passed.
func Ordered(steps []*typev1.Step) error {
	seen := make(map[string]bool, len(steps))
	for _, st := range steps {
		for _, dep := range st.GetDependsOn() {
			if !seen[dep] {
				return stageerr.Invalid("step %q comes before step %q, which it depends on", st.GetId(), dep)
			}
		}
		seen[st.GetId()] = true
	}
	return nil
}

// Tools indexes tools by name.
func Tools(list []*typev1.Tool) map[string]*typev1.Tool {
	tools := make(map[string]*typev1.Tool, len(list))
	for _, t := range list {
		tools[t.GetName()] = t
	}
	return tools
}

// available names the available tools for an error message.
func available(tools map[string]*typev1.Tool) string {
	if len(tools) == 0 {
		return "no tools are available"
	}
	return "available: " + strings.Join(slices.Sorted(maps.Keys(tools)), ", ")
}

// findCycle returns a dependency cycle as step ids, first id repeated at the end ("a", "b",
// "a" for a depends on b, b depends on a), or nil. Steps are visited in plan order, so the
// answer is deterministic.
func findCycle(steps []*typev1.Step, index map[string]int) []string {
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(steps))
	var path []int
	var visit func(i int) []string
	visit = func(i int) []string {
		state[i] = onPath
		path = append(path, i)
		for _, dep := range steps[i].GetDependsOn() {
			j := index[dep]
			switch state[j] {
			case onPath:
				start := slices.Index(path, j)
				cycle := make([]string, 0, len(path)-start+1)
				for _, k := range path[start:] {
					cycle = append(cycle, steps[k].GetId())
				}
				return append(cycle, steps[j].GetId())
			case unvisited:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range steps {
		if state[i] == unvisited {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}
