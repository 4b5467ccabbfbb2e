† ñÂ±4¢><
defaultbillingorders"host-1/4242*xbatch 7 * 