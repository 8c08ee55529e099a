package build

import (
	"bufio"
	"fmt"
	"strings"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	// cmd is the upper-case keyword: FROM, RUN, COPY, ...
	cmd string
	// flags are the leading --name=value words (COPY --from=build).
	flags []string
	// args is the rest of the instruction.
	args string
}

// stage is a FROM and the instructions that follow it.
type stage struct {
	from instruction
	// image and name are what FROM names: FROM <image> AS <name>.
	image, name string
	body        []instruction
}

// parseDockerfile reads the subset of the Dockerfile syntax the project's
// Dockerfiles use: comments, line continuations, flags and stages.
func parseDockerfile(text string) ([]stage, error) {
	var (
		stages  []stage
		pending strings.Builder
		start   int
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if pending.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if pending.Len() == 0 {
			start = n
		}
		if cont, ok := strings.CutSuffix(line, `\`); ok {
			pending.WriteString(cont + " ")
			continue
		}
		pending.WriteString(line)
		in := splitInstruction(start, pending.String())
		pending.Reset()
		if in.cmd == "FROM" {
			words := strings.Fields(in.args)
			s := stage{from: in}
			if len(words) > 0 {
				s.image = words[0]
			}
			if len(words) == 3 && strings.EqualFold(words[1], "AS") {
				s.name = words[2]
			}
			stages = append(stages, s)
			continue
		}
		if len(stages) == 0 {
			if in.cmd == "ARG" {
				continue // an ARG before the first FROM is allowed
			}
			return nil, fmt.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	if pending.Len() > 0 {
		return nil, fmt.Errorf("line %d: the file ends inside a continued line", start)
	}
	return stages, sc.Err()
}

func splitInstruction(line int, s string) instruction {
	cmd, rest, _ := strings.Cut(s, " ")
	in := instruction{line: line, cmd: strings.ToUpper(cmd)}
	rest = strings.TrimSpace(rest)
	for strings.HasPrefix(rest, "--") {
		flag, after, _ := strings.Cut(rest, " ")
		in.flags = append(in.flags, flag)
		rest = strings.TrimSpace(after)
	}
	in.args = rest
	return in
}

// find returns the stage's instructions with keyword cmd.
func (s stage) find(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (in instruction) flag(name string) (string, bool) {
	for _, f := range in.flags {
		if v, ok := strings.CutPrefix(f, "--"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}
