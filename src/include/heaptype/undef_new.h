/* heaptype/undef_new.h: removes the `new` macro, e.g. around a class that declares
 * `operator new` or a header that calls `::operator new` by name. Include
 * heaptype/define_new.h afterwards. No include guard on purpose. */
#ifdef __cplusplus
#undef new
#endif
