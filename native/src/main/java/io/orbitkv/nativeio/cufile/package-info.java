/** cuFile (GPUDirect Storage) through FFM: probed once, unavailable with its cause where the library is absent. */
package io.orbitkv.nativeio.cufile;
