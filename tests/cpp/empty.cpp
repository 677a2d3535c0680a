// empty.cpp: a program built with HeapType that neither allocates nor names an
// allocation function itself. Everything it allocates comes from glibc and
// libstdc++.so at start-up; it must still write a profile. Linked without the
// runtime, it must fail to link with HeapType's named error.
int main() { return 0; }
