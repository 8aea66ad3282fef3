// otlpcheck reads an OTLP profiles export request (protobuf) with the OpenTelemetry Collector's own pdata,
// as the Collector's OTLP receiver does, and prints what it holds as JSON: the resource's attributes, each
// profile's sample type and unit with its total and its cumulative total by function, the sample
// attributes' totals of inuse_space, and the mappings' build ids. It fails on what pdata refuses, and on a
// table index out of range.
//
//	otlpcheck profile.otlp.pb
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
)

type summary struct {
	Resource   map[string]string           `json:"resource"`
	Scope      string                      `json:"scope"`
	Profiles   []profileSummary            `json:"profiles"`
	Attributes map[string]int64            `json:"inuse_space_by_attribute"`
	BuildIDs   []string                    `json:"build_ids"`
	Functions  map[string]map[string]int64 `json:"by_function"`
}

type profileSummary struct {
	Type     string `json:"type"`
	Unit     string `json:"unit"`
	Total    int64  `json:"total"`
	Samples  int    `json:"samples"`
	Period   int64  `json:"period"`
	Time     uint64 `json:"time_unix_nano"`
	Duration uint64 `json:"duration_nano"`
	// The profile's own attributes (how it was sampled), key to value.
	Attributes map[string]string `json:"attributes"`
}

func fail(format string, arguments ...any) {
	fmt.Fprintf(os.Stderr, "otlpcheck: "+format+"\n", arguments...)
	os.Exit(1)
}

func main() {
	body, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail("%v", err)
	}
	request := pprofileotlp.NewExportRequest()
	if err := request.UnmarshalProto(body); err != nil {
		fail("pdata refuses it: %v", err)
	}
	profiles := request.Profiles()
	dictionary := profiles.Dictionary()
	strs := dictionary.StringTable()
	str := func(index int32) string {
		if index < 0 || int(index) >= strs.Len() {
			fail("string index %d of %d", index, strs.Len())
		}
		return strs.At(int(index))
	}
	out := summary{
		Resource:   map[string]string{},
		Attributes: map[string]int64{},
		BuildIDs:   []string{},
		Functions:  map[string]map[string]int64{},
	}
	for i := 1; i < dictionary.MappingTable().Len(); i++ {
		indices := dictionary.MappingTable().At(i).AttributeIndices()
		for j := 0; j < indices.Len(); j++ {
			attribute := dictionary.AttributeTable().At(int(indices.At(j)))
			if str(attribute.KeyStrindex()) == "process.executable.build_id.gnu" {
				out.BuildIDs = append(out.BuildIDs, attribute.Value().AsString())
			}
		}
	}
	for i := 0; i < profiles.ResourceProfiles().Len(); i++ {
		resource := profiles.ResourceProfiles().At(i)
		resource.Resource().Attributes().Range(func(key string, value pcommon.Value) bool {
			out.Resource[key] = value.AsString()
			return true
		})
		for j := 0; j < resource.ScopeProfiles().Len(); j++ {
			scope := resource.ScopeProfiles().At(j)
			out.Scope = scope.Scope().Name() + " " + scope.Scope().Version()
			for k := 0; k < scope.Profiles().Len(); k++ {
				out.Profiles = append(out.Profiles, summarize(scope.Profiles().At(k), dictionary, str, &out))
			}
		}
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		fail("%v", err)
	}
}

// summarize totals one profile, by function (each function once a sample, wherever it is in the stack)
// and, for inuse_space, by sample attribute.
func summarize(profile pprofile.Profile, dictionary pprofile.ProfilesDictionary, str func(int32) string, out *summary) profileSummary {
	kind := str(profile.SampleType().TypeStrindex())
	result := profileSummary{
		Type: kind, Unit: str(profile.SampleType().UnitStrindex()), Samples: profile.Samples().Len(),
		Period: profile.Period(), Time: uint64(profile.Time()), Duration: profile.DurationNano(),
		Attributes: map[string]string{},
	}
	for i := 0; i < profile.AttributeIndices().Len(); i++ {
		index := int(profile.AttributeIndices().At(i))
		if index >= dictionary.AttributeTable().Len() {
			fail("%s: attribute index %d of %d", kind, index, dictionary.AttributeTable().Len())
		}
		attribute := dictionary.AttributeTable().At(index)
		result.Attributes[str(attribute.KeyStrindex())] = attribute.Value().AsString()
	}
	byFunction := map[string]int64{}
	for i := 0; i < profile.Samples().Len(); i++ {
		sample := profile.Samples().At(i)
		if sample.Values().Len() != 1 {
			fail("%s: a sample with %d values", kind, sample.Values().Len())
		}
		value := sample.Values().At(0)
		result.Total += value
		if int(sample.StackIndex()) >= dictionary.StackTable().Len() {
			fail("stack index %d of %d", sample.StackIndex(), dictionary.StackTable().Len())
		}
		seen := map[string]bool{}
		locations := dictionary.StackTable().At(int(sample.StackIndex())).LocationIndices()
		for j := 0; j < locations.Len(); j++ {
			location := dictionary.LocationTable().At(int(locations.At(j)))
			for l := 0; l < location.Lines().Len(); l++ {
				function := dictionary.FunctionTable().At(int(location.Lines().At(l).FunctionIndex()))
				name := str(function.NameStrindex())
				if !seen[name] {
					seen[name] = true
					byFunction[name] += value
				}
			}
		}
		if kind == "inuse_space" {
			attributes := sample.AttributeIndices()
			for j := 0; j < attributes.Len(); j++ {
				attribute := dictionary.AttributeTable().At(int(attributes.At(j)))
				out.Attributes[str(attribute.KeyStrindex())+"="+attribute.Value().AsString()] += value
			}
		}
	}
	out.Functions[kind] = byFunction
	return result
}
