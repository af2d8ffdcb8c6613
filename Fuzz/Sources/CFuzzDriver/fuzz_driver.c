// The declaration in include/ is all; libFuzzer defines the function.
