// Command hello prints hello: TestBuildBinaryReplacesStale builds it.
package main

import "fmt"

func main() { fmt.Println("hello") }
