// Package wasmwarm holds one test, TestWarmCompileCache, that fills the tests' persistent compilation cache
// (wasmtest.CompileCacheDir) with the Go guests the tests load, in a
// process without the race detector.
//
// A test process built with -race runs wazero's compiler instrumented:
// compiling a 2 MB Go guest costs it 10–20 s of CPU, and every test
// process that starts with the cache cold (a fresh machine, or a guest
// whose source changed) pays it for each guest, several processes at once.
// Compiled here first, they find the machine code cached (wazero's file
// cache is keyed by the module's bytes and the CPU, not by how the host
// was built). go tool task test runs it without -race before the race
// run; it is a test because a test binary names wazero's cache folder
// as the test processes do ("wazero-dev-…": test binaries carry no
// module versions), which a command's would not.
package wasmwarm
