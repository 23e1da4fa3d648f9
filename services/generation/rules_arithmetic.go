package generation

import (
	"regexp"
	"strings"
)

var (
	// operatorWords turns spoken operators into symbols, longest phrases first.
	operatorWords = strings.NewReplacer(
		"multiplied by", "*",
		"divided by", "/",
		"times", "*",
		"plus", "+",
		"minus", "-",
		"×", "*",
		"÷", "/",
	)
	// dateRe is a date written with digits ("2024-01-05", "12/05/2024"), not a subtraction or
	// a division.
	dateRe = regexp.MustCompile(`\b(\d{4}-\d{2}-\d{2}|\d{1,2}/\d{1,2}/\d{4})\b`)
	// groupedRe is a number written with thousands separators ("1,000,000").
	groupedRe = regexp.MustCompile(`\b\d{1,3}(,\d{3})+\b`)
	// letterXRe is an "x" used as multiplication between two numbers ("3 x 4").
	letterXRe = regexp.MustCompile(`(\d)\s*x\s*(\d)`)
	// expressionRe is a run of characters an arithmetic expression is made of.
	expressionRe = regexp.MustCompile(`[0-9.()+\-*/\s]+`)
	// binaryRe is an operator between two operands.
	binaryRe = regexp.MustCompile(`[0-9)]\s*[+\-*/]\s*[0-9(\-]`)
)

// arithmetic finds an arithmetic expression in text ("what is 6 times 7", "calculate
// (2+3)*4", "1,000 plus 2,500") and returns it with spoken operators turned into symbols,
// thousands separators and spaces removed ("6*7", "(2+3)*4", "1000+2500"). Dates are not
// arithmetic.
func arithmetic(text string) (string, bool) {
	s := dateRe.ReplaceAllString(operatorWords.Replace(strings.ToLower(text)), " ")
	s = groupedRe.ReplaceAllStringFunc(s, func(n string) string { return strings.ReplaceAll(n, ",", "") })
	s = letterXRe.ReplaceAllString(s, "$1*$2")
	best := ""
	for _, candidate := range expressionRe.FindAllString(s, -1) {
		candidate = strings.Join(strings.Fields(candidate), "")
		candidate = strings.TrimLeft(strings.TrimRight(candidate, ".("), ")")
		if binaryRe.MatchString(candidate) && len(candidate) > len(best) {
			best = candidate
		}
	}
	return best, best != ""
}
