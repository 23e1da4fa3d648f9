package action

import (
	"context"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
)

// maxExpressionLength bounds calculator input.
const maxExpressionLength = 1024

// calculatorTool is the calculator built-in: it evaluates an arithmetic expression.
type calculatorTool struct {
	def *typev1.Tool
}

func newCalculatorTool() (*calculatorTool, error) {
	schema, err := objectSchema(map[string]any{
		"expression": map[string]any{
			"type":        "string",
			"description": "Arithmetic expression with numbers, + - * / % ^ (power) and parentheses, e.g. \"(2 + 3) * 4 ^ 2\".",
			"minLength":   1,
			"maxLength":   maxExpressionLength,
		},
	}, "expression")
	if err != nil {
		return nil, err
	}
	return &calculatorTool{def: &typev1.Tool{
		Name:        "calculator",
		Description: "Evaluates an arithmetic expression exactly as written and returns the number.",
		InputSchema: schema,
		Server:      BuiltinServer,
		Idempotent:  true,
	}}, nil
}

// Definition describes the calculator.
func (t *calculatorTool) Definition() *typev1.Tool { return t.def }

// Call evaluates the expression argument.
func (t *calculatorTool) Call(_ context.Context, call Call) (string, error) {
	expression, _ := call.Arguments["expression"].(string)
	v, err := evaluate(expression)
	if err != nil {
		return "", err
	}
	return formatNumber(v), nil
}
