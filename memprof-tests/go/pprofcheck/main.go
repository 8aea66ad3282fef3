// pprofcheck reads memprof's pprof profiles with github.com/google/pprof/profile, the library Parca and
// Grafana Pyroscope ingest with, as memprof-tests/tests/engines.rs asks:
//
//	pprofcheck FIRST SECOND FUNCTION
//
// parses both (gzip or not), checks each (CheckValid), then takes the second less the first as Grafana
// Alloy's delta does for cumulative types (the first scaled by -1 and merged with the second), and prints
// one JSON object: each profile's sample types and sample count, the delta of each type in all and under
// stacks through a function whose name contains FUNCTION, and how many merged samples went below zero.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/google/pprof/profile"
)

type summary struct {
	SampleTypes   []string         `json:"sample_types"`
	Samples       []int            `json:"samples"`
	Delta         map[string]int64 `json:"delta"`
	FunctionDelta map[string]int64 `json:"function_delta"`
	Negative      map[string]int   `json:"negative"`
}

func read(path string) *profile.Profile {
	file, err := os.Open(path)
	if err != nil {
		fail("open %s: %v", path, err)
	}
	defer file.Close()
	parsed, err := profile.Parse(file)
	if err != nil {
		fail("parse %s: %v", path, err)
	}
	if err := parsed.CheckValid(); err != nil {
		fail("check %s: %v", path, err)
	}
	return parsed
}

func fail(format string, arguments ...any) {
	fmt.Fprintf(os.Stderr, "pprofcheck: "+format+"\n", arguments...)
	os.Exit(1)
}

func through(sample *profile.Sample, function string) bool {
	for _, location := range sample.Location {
		for _, line := range location.Line {
			if line.Function != nil && strings.Contains(line.Function.Name, function) {
				return true
			}
		}
	}
	return false
}

func main() {
	if len(os.Args) != 4 {
		fail("usage: pprofcheck FIRST SECOND FUNCTION")
	}
	first, second, function := read(os.Args[1]), read(os.Args[2]), os.Args[3]
	out := summary{Delta: map[string]int64{}, FunctionDelta: map[string]int64{}, Negative: map[string]int{}}
	for _, kind := range second.SampleType {
		out.SampleTypes = append(out.SampleTypes, kind.Type+"/"+kind.Unit)
	}
	out.Samples = []int{len(first.Sample), len(second.Sample)}
	first.Scale(-1)
	delta, err := profile.Merge([]*profile.Profile{second, first})
	if err != nil {
		fail("merge: %v", err)
	}
	if err := delta.CheckValid(); err != nil {
		fail("check the delta: %v", err)
	}
	for _, sample := range delta.Sample {
		for index, kind := range delta.SampleType {
			value := sample.Value[index]
			out.Delta[kind.Type] += value
			if through(sample, function) {
				out.FunctionDelta[kind.Type] += value
			}
			if value < 0 {
				out.Negative[kind.Type]++
			}
		}
	}
	encoded, _ := json.Marshal(out)
	fmt.Println(string(encoded))
}
