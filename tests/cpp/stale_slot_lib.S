// stale_slot_lib.S: a function without a frame pointer that uses rbp for its own data,
// built into a shared library (outside the module the runtime is linked into, so a
// walk steps over it by its frame rule). Besides the slot its prologue pushed the
// caller's rbp to, a local slot below holds `stale`, or, when `stale` is 0, another
// copy of the caller's rbp: what a stale local left by an earlier call can hold (glibc's
// __tz_convert under a test body). Only the call frame information says which slot is
// the saved one.
//
//   void call_with_stale_slot(void (*callback)(void), long stale);
        .text
        .globl  call_with_stale_slot
        .type   call_with_stale_slot, @function
call_with_stale_slot:
        .cfi_startproc
        pushq   %rbp
        .cfi_def_cfa_offset 16
        .cfi_offset %rbp, -16
        subq    $16, %rsp
        .cfi_def_cfa_offset 32
        movq    $0, 8(%rsp)
        testq   %rsi, %rsi
        jnz     1f
        movq    %rbp, %rsi
1:      movq    %rsi, (%rsp)
        movq    $0x5eed, %rbp
        call    *%rdi
        addq    $16, %rsp
        .cfi_def_cfa_offset 16
        popq    %rbp
        .cfi_def_cfa_offset 8
        ret
        .cfi_endproc
        .size   call_with_stale_slot, .-call_with_stale_slot
        .section .note.GNU-stack,"",@progbits
