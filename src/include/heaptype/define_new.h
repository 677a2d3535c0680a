/* heaptype/define_new.h: (re)defines `new` so that new-expressions report their type.
 * No include guard on purpose: include it again after heaptype/undef_new.h to end a
 * fenced region (code that declares its own operator new, third-party headers). */
#ifdef __cplusplus
#undef new
#define new heaptype_new_trick{} * new
#endif
