/* engine/h3drv.h - HTTP/3 connections for a worker's VUs (internal to engine/): the driver
 * table sq_engine__h3_driver (driver.h), built only with SQ_HAVE_H3. */
#ifndef SQ_ENGINE_H3DRV_H
#define SQ_ENGINE_H3DRV_H

#include "engine/driver.h"

#endif
