package action

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode"
)

// calcError is a calculator failure at a 1-based character position of the expression.
type calcError struct {
	pos int
	msg string
}

func (e *calcError) Error() string { return fmt.Sprintf("%s at position %d", e.msg, e.pos) }

// evaluate computes an arithmetic expression with a recursive-descent parser:
//
//	expr    = term { ("+" | "-") term }
//	term    = unary { ("*" | "/" | "%") unary }
//	unary   = "-" unary | power
//	power   = primary [ "^" unary ]      (right-associative, binds tighter than unary minus)
//	primary = number | "(" expr ")"
//
// Numbers are decimals (12, 0.5, .5); whitespace is ignored; any other character is an error.
func evaluate(expression string) (float64, error) {
	p := &calcParser{src: []rune(expression)}
	p.skipSpace()
	if p.atEnd() {
		return 0, errors.New("empty expression")
	}
	v, err := p.expr()
	if err != nil {
		return 0, err
	}
	p.skipSpace()
	if !p.atEnd() {
		return 0, p.unexpected()
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, errors.New("the result is not a finite number")
	}
	return v, nil
}

// calcParser holds the expression and the index of the next character.
type calcParser struct {
	src []rune
	pos int
}

func (p *calcParser) atEnd() bool { return p.pos >= len(p.src) }

func (p *calcParser) skipSpace() {
	for !p.atEnd() && unicode.IsSpace(p.src[p.pos]) {
		p.pos++
	}
}

// peek skips whitespace and returns the next character, or 0 at the end.
func (p *calcParser) peek() rune {
	p.skipSpace()
	if p.atEnd() {
		return 0
	}
	return p.src[p.pos]
}

// errorAt returns an error at the 0-based index i.
func (p *calcParser) errorAt(i int, format string, args ...any) error {
	return &calcError{pos: i + 1, msg: fmt.Sprintf(format, args...)}
}

// unexpected reports the character at the current position (or the end) as unexpected.
func (p *calcParser) unexpected() error {
	if p.atEnd() {
		return p.errorAt(p.pos, "unexpected end of expression")
	}
	c := p.src[p.pos]
	if isCalcChar(c) {
		return p.errorAt(p.pos, "unexpected %q", c)
	}
	return p.errorAt(p.pos, "invalid character %q", c)
}

func (p *calcParser) expr() (float64, error) {
	v, err := p.term()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.pos++
		rhs, err := p.term()
		if err != nil {
			return 0, err
		}
		if op == '+' {
			v += rhs
		} else {
			v -= rhs
		}
	}
}

func (p *calcParser) term() (float64, error) {
	v, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		op := p.peek()
		if op != '*' && op != '/' && op != '%' {
			return v, nil
		}
		opPos := p.pos
		p.pos++
		rhs, err := p.unary()
		if err != nil {
			return 0, err
		}
		switch {
		case op == '*':
			v *= rhs
		case rhs == 0 && op == '/':
			return 0, p.errorAt(opPos, "division by zero")
		case rhs == 0:
			return 0, p.errorAt(opPos, "modulo by zero")
		case op == '/':
			v /= rhs
		default:
			v = math.Mod(v, rhs)
		}
	}
}

func (p *calcParser) unary() (float64, error) {
	if p.peek() == '-' {
		p.pos++
		v, err := p.unary()
		return -v, err
	}
	return p.power()
}

func (p *calcParser) power() (float64, error) {
	base, err := p.primary()
	if err != nil {
		return 0, err
	}
	if p.peek() != '^' {
		return base, nil
	}
	p.pos++
	exp, err := p.unary()
	if err != nil {
		return 0, err
	}
	return math.Pow(base, exp), nil
}

func (p *calcParser) primary() (float64, error) {
	c := p.peek()
	switch {
	case c == '(':
		open := p.pos
		p.pos++
		v, err := p.expr()
		if err != nil {
			return 0, err
		}
		if p.peek() != ')' {
			if p.atEnd() {
				return 0, p.errorAt(open, "unclosed '('")
			}
			return 0, p.unexpected()
		}
		p.pos++
		return v, nil
	case isDigit(c) || c == '.':
		return p.number()
	}
	return 0, p.unexpected()
}

func (p *calcParser) number() (float64, error) {
	start := p.pos
	for !p.atEnd() && (isDigit(p.src[p.pos]) || p.src[p.pos] == '.') {
		p.pos++
	}
	text := string(p.src[start:p.pos])
	v, err := strconv.ParseFloat(text, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return 0, p.errorAt(start, "number %q is out of range", text)
	case err != nil:
		return 0, p.errorAt(start, "invalid number %q", text)
	}
	return v, nil
}

func isDigit(c rune) bool { return c >= '0' && c <= '9' }

// isCalcChar reports whether c belongs to the calculator's alphabet.
func isCalcChar(c rune) bool {
	switch c {
	case '+', '-', '*', '/', '%', '^', '(', ')', '.':
		return true
	}
	return isDigit(c)
}

// formatNumber renders v without trailing zeros or float noise: 42, 0.5, 0.3 (for 0.1+0.2).
// A finite v so close to the largest float64 that 15 significant digits round it past it is
// rendered as it is, not as the +Inf the rounding would make.
func formatNumber(v float64) string {
	rounded, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 15, 64), 64) // v is finite
	if err != nil {
		rounded = v
	}
	if rounded == 0 {
		rounded = 0 // -0 prints as 0
	}
	return strconv.FormatFloat(rounded, 'f', -1, 64)
}
