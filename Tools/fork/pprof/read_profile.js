// Read a pprof profile with the `pprof-format` decoder (the JavaScript
// package that Datadog's profilers use) and print what it holds as JSON,
// for test_tracemalloc_pprof to compare with the snapshot it came from.
//
//   node read_profile.js PROFILE[.pb.gz]
//
// pprof-format is looked up in $TRACEMALLOC_FORK_CACHE/npm (default
// ~/.cache/tracemalloc-fork/npm), where install-readers.sh puts it.
// Output: {"sample_types": [[type, unit], ...], "default_sample_type",
// "period_type", "period", "comments", "samples": [{"frames": [[file,
// line], ...] (the leaf first), "values": [...], "labels": {key: str}}],
// "lines": [[file, line, value0, value1, ...], ...]}, where "lines" sums
// the values per line of each sample's leaf location (pprof's flat view by
// line), base samples included.
'use strict';

const fs = require('fs');
const os = require('os');
const path = require('path');
const zlib = require('zlib');

const cache = process.env.TRACEMALLOC_FORK_CACHE
    || path.join(os.homedir(), '.cache', 'tracemalloc-fork');
const { Profile } = require(
    path.join(cache, 'npm', 'node_modules', 'pprof-format'));

// pprof-format returns a varint of more than 4 bytes as an unsigned
// BigInt; an int64 field is two's complement on 64 bits (negative values
// are those of a base profile).
function int64(value) {
    return Number(BigInt.asIntN(64, BigInt(value)));
}

function main(argv) {
    if (argv.length !== 1) {
        process.stderr.write('usage: node read_profile.js PROFILE\n');
        return 2;
    }
    let data = fs.readFileSync(argv[0]);
    if (data.length >= 2 && data[0] === 0x1f && data[1] === 0x8b) {
        data = zlib.gunzipSync(data);
    }
    const profile = Profile.decode(new Uint8Array(data));
    const strings = profile.stringTable.strings;
    const str = (index) => strings[int64(index)];

    const functions = new Map();
    for (const fn of profile.function) {
        functions.set(int64(fn.id), fn);
    }
    const locations = new Map();
    for (const loc of profile.location) {
        // The last line is the location's own function; the others were
        // inlined into it (never the case for tracemalloc's profiles).
        const line = loc.line[loc.line.length - 1];
        const fn = functions.get(int64(line.functionId));
        if (fn === undefined) {
            throw new Error(`location ${loc.id}: no function ${line.functionId}`);
        }
        locations.set(int64(loc.id), [str(fn.filename), int64(line.line)]);
    }

    const samples = [];
    const lines = new Map();
    for (const sample of profile.sample) {
        const frames = sample.locationId.map((id) => {
            const frame = locations.get(int64(id));
            if (frame === undefined) {
                throw new Error(`sample: no location ${id}`);
            }
            return frame;
        });
        const values = sample.value.map(int64);
        const labels = {};
        for (const label of sample.label) {
            labels[str(label.key)] = str(label.str);
        }
        samples.push({ frames, values, labels });
        if (frames.length) {
            const key = JSON.stringify(frames[0]);
            const totals = lines.get(key) || values.map(() => 0);
            lines.set(key, totals.map((total, i) => total + values[i]));
        }
    }

    const result = {
        sample_types: profile.sampleType.map(
            (vt) => [str(vt.type), str(vt.unit)]),
        default_sample_type: str(profile.defaultSampleType),
        period_type: profile.periodType
            ? [str(profile.periodType.type), str(profile.periodType.unit)]
            : null,
        period: int64(profile.period),
        comments: profile.comment.map(str),
        samples,
        lines: [...lines].map(([key, totals]) => [...JSON.parse(key), ...totals]),
    };
    process.stdout.write(JSON.stringify(result) + '\n');
    return 0;
}

process.exitCode = main(process.argv.slice(2));
